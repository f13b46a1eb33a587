#!/usr/bin/env bash
# kill -9 soak of crl run's run directory (not part of make check).  Each cycle starts a short DQN run
# (a checkpoint every 500 frames) and kills it with SIGKILL at a random moment, then kills up to two of
# the --resume runs that follow the same way, and finally resumes it to its end; the run must end
# bitwise as one never interrupted (trainer.ckpt, the replay buffer's dump, metrics.csv without its
# timing columns) with no temporary checkpoint directory left.  A kill that lands before the run wrote
# its settings leaves nothing to resume: the cycle starts the run again there with --overwrite.
#   tests/run-soak.sh [--cycles N] [--seed S] [--frames N]     (defaults 50 cycles, seed from the clock,
#                                                              6000 frames)
# Run from the build directory after `make` (it uses core/cli/crl and the plugins of the build tree).
# The seed fixes the kill moments' draws (the moments themselves also depend on the machine's speed).
set -uo pipefail
cycles=50
seed=$(( $(date +%s) % 32768 ))
frames=6000
while [ $# -gt 0 ]; do
    case $1 in
        --cycles) cycles=$2; shift 2 ;;
        --seed) seed=$2; shift 2 ;;
        --frames) frames=$2; shift 2 ;;
        -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
        *) echo "run-soak: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
build=$(pwd)
crl=$build/core/cli/crl
[ -x "$crl" ] || { echo "run-soak: run me from the build directory ($crl not found)" >&2; exit 2; }
src=$(cd "$(dirname "$0")/.." && pwd)
ini=$src/conf/examples/cartpole-dqn.ini
export CRL_PLUGIN_PATH="$build/plugins/classic/.libs:$build/plugins/transforms/.libs:$build/plugins/replay/.libs:$build/plugins/losses/.libs"
export CRL_PLUGIN_SCANNER="$build/core/crl-plugin-scanner"
export CRL_ENV_WORKER="$build/core/crl-env-worker"
export CRL_SYSCONFDIR="$build/tests/no-sysconf" XDG_CONFIG_HOME="$build/tests/no-xdg-config"
export XDG_DATA_HOME="$build/tests/no-xdg-data" CRL_PLUGINSDIR="$build/tests/no-system-plugins"
export XDG_CACHE_HOME="$build/tests/xdg-cache" OPENBLAS_NUM_THREADS=1
opts=(collector.total_frames=$frames train.checkpoint_interval=500 train.log_interval=500 train.eval_interval=2000
      train.eval_episodes=2 --quiet)
work=$(mktemp -d "${TMPDIR:-/tmp}/crl-run-soak-XXXXXX")
pid=
trap '[ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null; rm -rf "$work"' EXIT
RANDOM=$seed

t0=$(date +%s%N)
"$crl" run "$ini" "${opts[@]}" train.run_dir="$work/ref" >/dev/null || { echo "run-soak: the reference run failed" >&2; exit 1; }
ref_ms=$(( ($(date +%s%N) - t0) / 1000000 ))
echo "run-soak: seed $seed, $cycles cycles of $frames frames; the uninterrupted run takes $ref_ms ms"

same_as_ref() {
    cmp -s "$work/ref/checkpoint/trainer.ckpt" "$1/checkpoint/trainer.ckpt" \
        && diff -r -q "$work/ref/checkpoint/replay" "$1/checkpoint/replay" >/dev/null \
        && diff <(cut -d, -f1,4-8 "$work/ref/metrics.csv") <(cut -d, -f1,4-8 "$1/metrics.csv") >/dev/null
}
# The command that continues the run of $1: --resume once it wrote its settings, else a new start there.
continue_cmd() {
    if [ -f "$1/experiment.ini" ]; then
        echo run --resume "$1"
    else
        echo run "$ini" train.run_dir="$1" --overwrite
    fi
}

failed=0 landed=0 finished=0 in_ckpt=0 before_dir=0 from_zero=0
for ((c = 1; c <= cycles; c++)); do
    d=$work/c$c
    kills=$(( 1 + RANDOM % 3 ))
    notes=
    for ((k = 1; k <= kills; k++)); do
        if [ "$k" -eq 1 ]; then
            args=(run "$ini" train.run_dir="$d")
        else
            read -r -a args <<<"$(continue_cmd "$d")"
        fi
        # the first kill anywhere in the run (start-up included); the later ones in a resume, which has
        # less left to do
        ms=$(( (RANDOM * 32768 + RANDOM) % ((k == 1 ? ref_ms * 6 / 5 : ref_ms / 2) + 1) ))
        "$crl" "${args[@]}" "${opts[@]}" >/dev/null 2>&1 & pid=$!
        sleep "$(printf '%d.%03d' $((ms / 1000)) $((ms % 1000)))"
        if kill -KILL "$pid" 2>/dev/null; then
            wait "$pid" 2>/dev/null
            landed=$((landed + 1))
            if [ ! -d "$d" ]; then
                before_dir=$((before_dir + 1)); notes+=" kill@${ms}ms:before-dir"
            elif compgen -G "$d/checkpoint.tmp-*" >/dev/null; then
                in_ckpt=$((in_ckpt + 1)); notes+=" kill@${ms}ms:in-checkpoint"
            else
                notes+=" kill@${ms}ms"
            fi
        else
            wait "$pid" 2>/dev/null
            finished=$((finished + 1)); notes+=" ended-before-kill@${ms}ms"
        fi
        pid=
    done
    read -r -a args <<<"$(continue_cmd "$d")"
    [ -e "$d/checkpoint" ] || from_zero=$((from_zero + 1))
    out=$("$crl" "${args[@]}" "${opts[@]}" 2>&1); rc=$?
    if [ "$rc" -eq 0 ] && same_as_ref "$d" && ! compgen -G "$d/checkpoint.tmp-*" >/dev/null; then
        echo "cycle $c:$notes -> resumed, equal"
        rm -rf "$d"
    else
        failed=$((failed + 1))
        echo "cycle $c:$notes -> FAILED (exit $rc; the run directory is kept in $d.failed)"
        printf '%s\n' "$out" | sed 's/^/    /'
        mv "$d" "$d.failed"
        trap '[ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null' EXIT
    fi
done
echo "run-soak: $cycles cycles, seed $seed: $landed kills landed in a running crl run ($in_ckpt during a checkpoint," \
    "$before_dir before the run directory existed), $finished runs ended before their kill, $from_zero final" \
    "resumes started from frame 0; $failed failed"
[ "$failed" -eq 0 ]
