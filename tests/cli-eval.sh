#!/usr/bin/env bash
# Shell tests of `crl eval RUN_DIR` and `crl rollout --policy RUN_DIR`: the checkpoint a run wrote at its
# end evaluates to the run's last evaluation return (transformed and raw, VecNorm statistics included),
# the JSON output, and bad usage.
set -uo pipefail
crl=${CRL:?}
n=0; failures=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
nok() { n=$((n + 1)); failures=$((failures + 1)); echo "not ok $n - $1"; shift; printf '%s\n' "$@" | sed 's/^/# /'; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

cat > "$tmp/vn.ini" <<'INI'
[plugins]
load = classic, losses, transforms
[env]
backend = classic
id = Pendulum-v1
num_envs = 4
executor = processes
num_workers = 2
seed = 0
transforms = vn, sc
[transform.vn]
type = VecNorm
in_keys = observation
[transform.sc]
type = RewardScaling
loc = 0
scale = 0.01
[collector]
frames_per_batch = 256
total_frames = 1024
[loss]
type = ppo
num_cells = 16
[train]
epochs = 1
eval_interval = 512
eval_episodes = 3
eval_max_steps = 100
INI

# column N of metrics.csv's last row
last_col() { tail -1 "$1/metrics.csv" | cut -d, -f"$2"; }
# the value of key in crl eval --json output (numbers only)
json_num() { sed -n "s/.*\"$2\":\\([-0-9.e+]*\\).*/\\1/p" <<<"$1"; }
same() { python3 -c 'import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); sys.exit(0 if abs(a - b) <= 1e-5 * max(1, abs(a)) else 1)' "$1" "$2"; }

out=$("$crl" run "$tmp/vn.ini" train.run_dir="$tmp/run" --quiet 2>&1); rc=$?
header=$(head -1 "$tmp/run/metrics.csv")
if [ "$rc" -eq 0 ] && [ "$header" = "frames,seconds,fps,episodes,recent_return,loss,eval_return,optim_steps,recent_raw_return,eval_raw_return" ]
then ok "metrics.csv: the raw returns come after the eight columns it had"
else nok "metrics.csv header (exit $rc)" "$out" "$header"; fi

ev=$(last_col "$tmp/run" 7); evraw=$(last_col "$tmp/run" 10)
out=$("$crl" eval "$tmp/run" --json 2>&1); rc=$?
m=$(json_num "$out" mean); mr=$(json_num "$out" raw_mean)
if [ "$rc" -eq 0 ] && [ -n "$m" ] && [ -n "$ev" ] && same "$m" "$ev" && same "$mr" "$evraw" \
    && grep -q '"frames":1024,"episodes":3,' <<<"$out"
then ok "crl eval reproduces the run's last evaluation ($ev, raw $evraw) through VecNorm over worker processes"
else nok "crl eval --json (exit $rc): mean $m raw $mr, run $ev raw $evraw" "$out"; fi
# RewardScaling 0.01: transformed = raw / 100
if same "$(python3 -c "print($mr / 100)")" "$m"; then ok "the raw mean is 100 times the scaled one"
else nok "raw $mr vs scaled $m"; fi

out=$("$crl" eval "$tmp/run" --episodes 2 2>&1); rc=$?
if [ "$rc" -eq 0 ] && [ "$(grep -c '^  episode ' <<<"$out")" -eq 2 ] && grep -q '^mean return ' <<<"$out" \
    && grep -q '^raw mean return ' <<<"$out" && grep -q 'checkpoint at frame 1024' <<<"$out"
then ok "crl eval --episodes 2 prints two episodes, the mean and std"
else nok "crl eval --episodes (exit $rc)" "$out"; fi

out=$("$crl" eval "$tmp/run/checkpoint" --episodes 1 2>&1); rc=$?
if [ "$rc" -eq 0 ]; then ok "crl eval takes the checkpoint directory itself"
else nok "crl eval CHECKPOINT_DIR (exit $rc)" "$out"; fi

out=$("$crl" rollout --policy "$tmp/run" --steps 30 2>&1); rc=$?
if [ "$rc" -eq 0 ] && grep -qE '^  steps: +30 \(x 4 envs of classic/Pendulum-v1\)' <<<"$out"
then ok "crl rollout --policy acts with the run's policy"
else nok "crl rollout --policy (exit $rc)" "$out"; fi

# The whole program of doc/policy-files.md, built against this tree's libcrl, scores the policy as crl eval does.
src=${CRL_TEST_SRCDIR:?}/..; build=${CRL_TEST_BUILDDIR:?}/..
sed -n '/^```c$/,/^```$/p' "$src/doc/policy-files.md" | sed '1d;$d' > "$tmp/act.c"
# a sanitized libcrl (configure --enable-sanitizers) needs its runtime first in the program too; pixman
# linked in stays loaded when the classic plugin goes (its constructor's tables are not leaks of ours,
# see keep-cairo.h)
san=$(sed -n 's/^SANITIZER_CFLAGS = //p' "$build/Makefile")
if ${CC:-cc} $san -std=c11 -Wall -Wextra -Werror -I"$src/core/include" -I"$src/plugin-sdk/include" "$tmp/act.c" \
        -L"$build/core/.libs" -lcrl -Wl,-rpath,"$build/core/.libs" -o "$tmp/act" \
        -Wl,--no-as-needed $(pkg-config --libs pixman-1 2>/dev/null) 2>"$tmp/cc.err"; then
    out=$("$tmp/act" "$tmp/run/checkpoint" 2>&1); rc=$?
    want=$("$crl" eval "$tmp/run" --episodes 10 --json 2>&1)
    m=$(sed -n 's/^mean return \([^ ]*\) (raw \([^)]*\)) over 10 episodes$/\1/p' <<<"$out")
    if [ "$rc" -eq 0 ] && [ -n "$m" ] && same "$m" "$(json_num "$want" mean)"
    then ok "the program of doc/policy-files.md loads the policy with libcrl alone and scores it as crl eval"
    else nok "doc/policy-files.md's program (exit $rc)" "$out" "$want"; fi
else
    nok "doc/policy-files.md's program does not compile" "$(cat "$tmp/cc.err")"
fi

expect() {  # expect CODE REGEX what ARGS...
    local code=$1 re=$2 what=$3; shift 3
    local o; o=$("$@" 2>&1); local r=$?
    if [ "$r" -eq "$code" ] && grep -qE -e "$re" <<<"$o"; then ok "$what"; else nok "$what (exit $r)" "$o"; fi
}
expect 2 "holds no checkpoint" "crl eval of a directory without a checkpoint: exit 2" "$crl" eval "$tmp"
expect 2 "give a run directory" "crl eval without a directory: exit 2" "$crl" eval
expect 2 "--episodes '0'" "crl eval --episodes 0: exit 2" "$crl" eval "$tmp/run" --episodes 0
expect 2 "unknown option '--bogus'" "crl eval --bogus: exit 2" "$crl" eval "$tmp/run" --bogus
expect 2 "eval_max_steps" "crl eval with a bad override: exit 2 naming the key" \
    "$crl" eval "$tmp/run" train.eval_max_steps=0
expect 2 "give one of them" "crl rollout --policy with --actions: exit 2" \
    "$crl" rollout --policy "$tmp/run" --actions /dev/null --steps 3
expect 2 "no section.key=value" "crl rollout --policy with an experiment file: exit 2" \
    "$crl" rollout --policy "$tmp/run" "$tmp/vn.ini" --steps 3
cp "$tmp/run/checkpoint/trainer.ckpt" "$tmp/keep.ckpt"
head -c 200 "$tmp/keep.ckpt" > "$tmp/run/checkpoint/trainer.ckpt"
expect 1 "trainer.ckpt" "crl eval of a truncated checkpoint: exit 1 naming the file" "$crl" eval "$tmp/run"

echo "1..$n"
[ "$failures" -eq 0 ]
