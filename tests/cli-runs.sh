#!/usr/bin/env bash
# Shell tests of `crl run` keeping runs whole and apart: run directories made by mkdir (three runs in
# the same second, an existing run_dir, --overwrite), SIGINT and SIGTERM mid-run then --resume equal to
# an uninterrupted run (an LSTM policy's too), a second signal, kill -9 during a checkpoint and the
# leftover removed, a full disk at the final checkpoint and a metrics.csv or curve.png that cannot be
# written (exit 1), resume refusing changed settings unless --accept-changes, and a total_frames that is
# no multiple of frames_per_batch.  Processes are held in the middle of a checkpoint with the LD_PRELOAD shim
# (tests/enospc-shim.c), so no step depends on timing; waits for a condition only end a hung test.
set -uo pipefail
crl=${CRL:?}
srcdir=${CRL_TEST_SRCDIR:?}
shim=${CRL_TEST_BUILDDIR:?}/.libs/enospc-shim.so
n=0; failures=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
nok() { n=$((n + 1)); failures=$((failures + 1)); echo "not ok $n - $1"; shift; printf '%s\n' "$@" | sed 's/^/# /'; }
ini=$srcdir/../conf/examples/cartpole-dqn.ini
tmp=$(mktemp -d)
bg=()  # the crl processes started in the background: none outlives the test, whatever fails
trap 'for p in "${bg[@]}"; do kill -KILL "$p" 2>/dev/null; done; rm -rf "$tmp"' EXIT
[ -f "$shim" ] || { echo "cli-runs: $shim is missing (make check builds it)"; exit 99; }
# Under ASan the runtime must come first in the library list; the shim only wraps write and fallocate.
asan="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0"
preload="${LD_PRELOAD:+$LD_PRELOAD:}$shim"
# Short DQN runs: 1000 random frames, then training; evaluations at 1500 and 3000; a checkpoint every 1000.
small="collector.total_frames=3000 train.eval_interval=1500 train.eval_episodes=2 train.log_interval=500
       train.checkpoint_interval=1000"

# wait_for CMD...: until CMD succeeds (at most 120 s: the limit only ends a test that hangs).
wait_for() { for _ in $(seq 1200); do "$@" && return 0; sleep 0.1; done; return 1; }
has_tmp() { compgen -G "$1/checkpoint.tmp-*" >/dev/null; }
# The run in $1 ended as the uninterrupted reference did: trainer state, replay buffer and metrics.
same_as_ref() {
    cmp -s "$tmp/ref/checkpoint/trainer.ckpt" "$1/checkpoint/trainer.ckpt" \
        && diff -r -q "$tmp/ref/checkpoint/replay" "$1/checkpoint/replay" >/dev/null \
        && diff <(cut -d, -f1,4-8 "$tmp/ref/metrics.csv") <(cut -d, -f1,4-8 "$1/metrics.csv") >/dev/null
}
# stalled UNTIL CMD... &: CMD in the background with every write into a temporary checkpoint directory
# waiting until the file UNTIL exists.  The subshell of `&` becomes CMD (exec), so $! is crl's pid.
stalled() {
    local until=$1; shift
    exec env LD_PRELOAD="$preload" ASAN_OPTIONS="$asan" CRL_STALL_WRITE_MATCH=/checkpoint.tmp- \
        CRL_STALL_UNTIL="$until" "$@"
}

"$crl" run "$ini" $small train.run_dir="$tmp/ref" --quiet >/dev/null 2>&1 || { echo "the reference run failed"; exit 1; }

# ---- run directories ----

# The dated names of the next seconds are taken: three runs started together each get their own.
mkdir "$tmp/cwd"
(
    cd "$tmp/cwd" || exit 1
    now=$(date -u +%s)
    for s in $(seq -2 30); do mkdir -p "runs/cartpole-dqn-$(date -u -d "@$((now + s))" +%Y%m%d-%H%M%S)"; done
    pids=()
    for seed in 1 2 3; do
        "$crl" run "$ini" collector.total_frames=200 train.eval_episodes=0 train.seed=$seed --quiet >"out$seed" 2>&1 &
        pids+=($!)
    done
    rcs=0
    for p in "${pids[@]}"; do wait "$p" || rcs=1; done
    exit $rcs
); rc=$?
dirs=$(sed -n 's/^  run directory: *//p' "$tmp"/cwd/out? | sort -u)
good=$([ "$rc" -eq 0 ] && [ "$(wc -l <<<"$dirs")" -eq 3 ] && echo yes)
for seed in 1 2 3; do
    d=$(sed -n 's/^  run directory: *//p' "$tmp/cwd/out$seed")
    [[ $d =~ ^runs/cartpole-dqn-[0-9]{8}-[0-9]{6}-[0-9]+$ ]] && grep -qx "seed = $seed" "$tmp/cwd/$d/experiment.ini" \
        && [ "$(grep -c '^[0-9]' "$tmp/cwd/$d/metrics.csv")" -ge 1 ] && grep -q "train.seed=$seed" "$tmp/cwd/$d/run.txt" \
        || good=
done
nonempty=$(find "$tmp/cwd/runs" -mindepth 1 -maxdepth 1 -type d ! -empty | wc -l)
if [ -n "$good" ] && [ "$nonempty" -eq 3 ]
then ok "three runs started together with their dated names taken: three directories with a suffix, each its own run"
else nok "runs in the same second (exit $rc, $nonempty directories used)" "$dirs" "$(cat "$tmp"/cwd/out?)"; fi

mkdir "$tmp/taken"; echo mine > "$tmp/taken/notes"
out=$("$crl" run "$ini" collector.total_frames=200 train.run_dir="$tmp/taken" 2>&1); rc=$?
if [ "$rc" -eq 2 ] && grep -qF "command line: [train] run_dir = $tmp/taken exists" <<<"$out" \
    && grep -qF "crl run --resume '$tmp/taken'" <<<"$out" && grep -qF -- "--overwrite" <<<"$out" \
    && [ "$(ls "$tmp/taken")" = notes ] && [ "$(cat "$tmp/taken/notes")" = mine ]
then ok "an existing run_dir is refused (exit 2) naming it, --resume and --overwrite; nothing in it changes"
else nok "existing run_dir (exit $rc)" "$out" "$(ls -la "$tmp/taken")"; fi

out=$("$crl" run "$ini" collector.total_frames=200 train.run_dir="$tmp/taken" --overwrite 2>&1); rc=$?
ln -s "$tmp/ref" "$tmp/link"
out2=$("$crl" run "$ini" collector.total_frames=200 train.run_dir="$tmp/link" --overwrite 2>&1); rc2=$?
if [ "$rc" -eq 2 ] && grep -qF "holds no crl run" <<<"$out" && [ "$(cat "$tmp/taken/notes")" = mine ] \
    && [ "$rc2" -eq 2 ] && grep -qF "symbolic link" <<<"$out2" && same_as_ref "$tmp/ref"
then ok "--overwrite refuses a directory that holds no run, and a symbolic link (exit 2, both untouched)"
else nok "--overwrite refusals (exit $rc, $rc2)" "$out" "$out2"; fi

"$crl" run "$ini" collector.total_frames=200 train.eval_episodes=0 train.run_dir="$tmp/ow" --quiet >/dev/null 2>&1
mkdir "$tmp/outside"; echo keep > "$tmp/outside/keep"; ln -s "$tmp/outside" "$tmp/ow/escape"
mkdir "$tmp/ow/checkpoint.tmp-AAAAAA"; ln -s "$tmp/outside/keep" "$tmp/ow/checkpoint.tmp-AAAAAA/file"
out=$("$crl" run "$ini" collector.total_frames=200 train.eval_episodes=0 train.seed=7 train.run_dir="$tmp/ow" \
      --overwrite --quiet 2>&1); rc=$?
if [ "$rc" -eq 0 ] && grep -qF "removed the previous run in $tmp/ow" <<<"$out" && [ ! -e "$tmp/ow/escape" ] \
    && [ ! -e "$tmp/ow/checkpoint.tmp-AAAAAA" ] && [ "$(cat "$tmp/outside/keep")" = keep ] \
    && grep -qx "seed = 7" "$tmp/ow/experiment.ini" && grep -q "train.seed=7" "$tmp/ow/run.txt"
then ok "--overwrite replaces a run directory's contents without following the links in it"
else nok "--overwrite (exit $rc)" "$out" "$(ls -la "$tmp/ow" "$tmp/outside")"; fi

out=$("$crl" run --resume "$tmp/ow" --overwrite 2>&1); rc=$?
out2=$("$crl" run "$ini" --accept-changes 2>&1); rc2=$?
if [ "$rc" -eq 2 ] && grep -qF "does not go with --resume" <<<"$out" && [ "$rc2" -eq 2 ] && grep -qF "goes with --resume" <<<"$out2"
then ok "--overwrite with --resume, and --accept-changes without it: usage errors (exit 2)"
else nok "option pairs (exit $rc, $rc2)" "$out" "$out2"; fi

# ---- signals ----

# SIGINT, then SIGTERM, while the first checkpoint (frame 1000) is being written: it is finished, the
# run stops with 130 / 143 and the command to resume, and resuming ends as the uninterrupted run.
for sig in INT TERM; do
    d=$tmp/sig$sig; want=$([ $sig = INT ] && echo 130 || echo 143)
    rm -f "$tmp/go"
    stalled "$tmp/go" "$crl" run "$ini" $small train.run_dir="$d" --quiet >"$d.out" 2>"$d.err" & pid=$!; bg+=($pid)
    wait_for has_tmp "$d"
    busy=$("$crl" run --resume "$d" 2>&1); busy_rc=$?
    kill -$sig $pid
    wait_for grep -q "SIG$sig: stopping after the current update" "$d.err"
    touch "$tmp/go"
    wait $pid; rc=$?
    out=$("$crl" run --resume "$d" --quiet 2>&1); rc2=$?
    if [ "$rc" -eq "$want" ] && grep -qF "stopped by SIG$sig at frame 1000; the checkpoint is in $d/checkpoint" "$d.err" \
        && grep -qxF "crl run: continue with: crl run --resume '$d'" "$d.err" \
        && [ "$busy_rc" -eq 2 ] && grep -qF "is in use by another crl run (process $pid)" <<<"$busy" \
        && [ "$rc2" -eq 0 ] && same_as_ref "$d"
    then ok "SIG$sig mid-run: checkpoint, exit $want, the resume command; --resume ends bitwise as the uninterrupted run"
    else nok "SIG$sig (exit $rc, resume exit $rc2, busy exit $busy_rc)" "$(cat "$d.err")" "$busy" "$out"; fi
done

# A recurrent policy (the masked-CartPole LSTM example, small), SIGINT while its first checkpoint (frame
# 512) is being written: the resume ends bitwise as the uninterrupted run, the state the policy carries
# included.
lstm=$srcdir/../conf/examples/cartpole-masked-lstm-ppo.ini
lsmall="collector.frames_per_batch=256 env.num_envs=4 train.minibatch_size=64 train.eval_interval=512
        train.eval_episodes=1 train.log_interval=256 transform.norm.init_stats=50 train.checkpoint_interval=512
        collector.total_frames=1536"
"$crl" run "$lstm" $lsmall train.run_dir="$tmp/lref" --quiet >/dev/null 2>&1
d=$tmp/lsig
rm -f "$tmp/go"
stalled "$tmp/go" "$crl" run "$lstm" $lsmall train.run_dir="$d" --quiet >"$d.out" 2>"$d.err" & pid=$!; bg+=($pid)
wait_for has_tmp "$d"
kill -INT $pid
wait_for grep -q "SIGINT: stopping after the current update" "$d.err"
touch "$tmp/go"
wait $pid; rc=$?
out=$("$crl" run --resume "$d" --quiet 2>&1); rc2=$?
if [ "$rc" -eq 130 ] && grep -qF "stopped by SIGINT at frame 512; the checkpoint is in $d/checkpoint" "$d.err" \
    && [ "$rc2" -eq 0 ] && [ -s "$tmp/lref/checkpoint/trainer.ckpt" ] \
    && cmp -s "$tmp/lref/checkpoint/trainer.ckpt" "$d/checkpoint/trainer.ckpt" \
    && diff <(cut -d, -f1,4-8 "$tmp/lref/metrics.csv") <(cut -d, -f1,4-8 "$d/metrics.csv") >/dev/null
then ok "SIGINT mid-run of an LSTM policy: --resume ends bitwise as the uninterrupted run (carried state kept)"
else nok "SIGINT of an LSTM policy (exit $rc, resume exit $rc2)" "$(cat "$d.err")" "$out"; fi

# kill -9 while the second checkpoint (frame 2000) of a resumed run is being written: the first stays
# whole, and the next resume removes the leftover, drops the metrics rows past frame 1000 and finishes.
d=$tmp/kill
"$crl" run "$ini" $small collector.total_frames=1000 train.run_dir="$d" --quiet >/dev/null 2>&1
stalled "$tmp/never" "$crl" run --resume "$d" collector.total_frames=3000 --quiet >/dev/null 2>&1 & pid=$!; bg+=($pid)
wait_for has_tmp "$d"
kill -KILL $pid; wait $pid; rc=$?
left=$(ls -d "$d"/checkpoint.tmp-* 2>/dev/null | wc -l)
out=$("$crl" run --resume "$d" collector.total_frames=3000 --quiet 2>&1); rc2=$?
if [ "$rc" -eq 137 ] && [ "$left" -eq 1 ] && [ "$rc2" -eq 0 ] \
    && grep -qF "removed 1 temporary checkpoint directory ($d/checkpoint.tmp-XXXXXX) left by an interrupted run" <<<"$out" \
    && grep -qF "dropped 2 rows logged after the checkpoint's frame 1000" <<<"$out" && ! has_tmp "$d" && same_as_ref "$d"
then ok "kill -9 during a checkpoint: the next resume removes the temporary directory (saying so) and ends as the uninterrupted run"
else nok "kill -9 during a checkpoint (exit $rc, $left left, resume exit $rc2)" "$out"; fi

# A second signal while the first checkpoint is held: exit at once with 128 + its number, no
# checkpoint; --resume starts again from frame 0 and ends as the uninterrupted run.
d=$tmp/twice
stalled "$tmp/never" "$crl" run "$ini" $small train.run_dir="$d" --quiet >/dev/null 2>"$d.err" & pid=$!; bg+=($pid)
wait_for has_tmp "$d"
kill -INT $pid
wait_for grep -q "SIGINT: stopping after the current update" "$d.err"
kill -TERM $pid; wait $pid; rc=$?
out=$("$crl" run --resume "$d" --quiet 2>&1); rc2=$?
if [ "$rc" -eq 143 ] && grep -qF "SIGTERM, a second signal: stopping now, before the first checkpoint" "$d.err" \
    && grep -qxF "crl run: start again from frame 0 with: crl run --resume '$d'" "$d.err" \
    && [ "$rc2" -eq 0 ] && grep -qF "no checkpoint yet" <<<"$out" && grep -qF "removed 1 temporary checkpoint" <<<"$out" \
    && same_as_ref "$d"
then ok "a second signal stops at once (exit 143); the resume starts again from frame 0 and ends as the uninterrupted run"
else nok "second signal (exit $rc, resume exit $rc2)" "$(cat "$d.err")" "$out"; fi

# ---- writes that fail ----

d=$tmp/full
out=$(env LD_PRELOAD="$preload" ASAN_OPTIONS="$asan" CRL_ENOSPC_WRITE_MATCH=/checkpoint.tmp- \
      "$crl" run "$ini" $small train.checkpoint_interval=0 train.run_dir="$d" --quiet 2>&1); rc=$?
if [ "$rc" -eq 1 ] && grep -qF "checkpoint '$d/checkpoint'" <<<"$out" && grep -qF "No space left on device" <<<"$out" \
    && [ ! -e "$d/checkpoint" ] && ! has_tmp "$d" && [ "$(grep -c '^[0-9]' "$d/metrics.csv")" -ge 6 ] \
    && { [ ! -f "$tmp/ref/curve.png" ] || [ -s "$d/curve.png" ]; }
then ok "a full disk at the final checkpoint: exit 1 with the reason, metrics and curve still written, nothing left over"
else nok "full disk (exit $rc)" "$out" "$(ls -la "$d")"; fi

d=$tmp/fsize
out=$( (trap '' XFSZ; ulimit -f 8; exec "$crl" run "$ini" $small train.log_interval=0 train.checkpoint_interval=0 train.run_dir="$d" --quiet) 2>&1); rc=$?
if [ "$rc" -eq 1 ] && grep -qF "cannot write '$d/metrics.csv': File too large" <<<"$out"
then ok "metrics.csv that cannot grow (file size limit): the run stops with exit 1 naming it"
else nok "metrics.csv write failure (exit $rc)" "$out"; fi

if [ -f "$tmp/ref/curve.png" ]; then
    d=$tmp/sigINT
    rm -f "$d/curve.png"; mkdir "$d/curve.png"
    out=$("$crl" run --resume "$d" --quiet 2>&1); rc=$?
    if [ "$rc" -eq 1 ] && grep -qF "cannot draw the learning curve" <<<"$out"
    then ok "a curve.png that cannot be written: exit 1 naming it"
    else nok "curve failure (exit $rc)" "$out"; fi
else
    ok "# SKIP no learning curves in this build (no cairo)"
fi

# ---- resume: the settings against the checkpoint's ----

d=$tmp/chg
"$crl" run "$ini" $small collector.total_frames=2000 train.run_dir="$d" --quiet >/dev/null 2>&1
before=$(cksum "$d/checkpoint/trainer.ckpt" "$d/experiment.ini" "$d/run.txt")
out=$("$crl" run --resume "$d" optim.lr=0.002 loss.double_dqn=false collector.total_frames=3000 2>&1); rc=$?
ck=$d/checkpoint/experiment.ini
if [ "$rc" -eq 2 ] && grep -qF "2 settings differ from the checkpoint's" <<<"$out" \
    && grep -qE "^  \[optim\] lr: 0.0023 \($ck:[0-9]+\) -> 0.002 \(command line\)$" <<<"$out" \
    && grep -qE "^  \[loss\] double_dqn: true \($ck:[0-9]+\) -> false \(command line\)$" <<<"$out" \
    && ! grep -q "total_frames" <<<"$out" && grep -qF -- "--accept-changes" <<<"$out" \
    && [ "$before" = "$(cksum "$d/checkpoint/trainer.ckpt" "$d/experiment.ini" "$d/run.txt")" ]
then ok "--resume with changed settings: refused (exit 2) listing each key, old and new value and where set; nothing changes"
else nok "changed settings refused (exit $rc)" "$out"; fi

out=$("$crl" run --resume "$d" optim.lr=0.002 loss.double_dqn=false collector.total_frames=3000 --accept-changes --quiet 2>&1); rc=$?
if [ "$rc" -eq 0 ] && grep -qF "the run is no longer bitwise reproducible" <<<"$out" \
    && grep -qF "accepted with --accept-changes: from frame 2000 the run is no longer bitwise reproducible" "$d/run.txt" \
    && grep -qE "^  \[optim\] lr: 0.0023 .* -> 0.002 \(command line\)$" "$d/run.txt" \
    && grep -qE "^  \[collector\] total_frames: 2000 .* -> 3000 \(command line\)$" "$d/run.txt" \
    && grep -qx "lr = 0.002" "$d/checkpoint/experiment.ini"
then ok "--accept-changes resumes with them, and the note and run.txt say the run is no longer bitwise reproducible"
else nok "--accept-changes (exit $rc)" "$out" "$(cat "$d/run.txt")"; fi

# When the run stops, how often it evaluates and checkpoints, and a value written another way (1e-8 as
# 0.00000001) are no change to the trainer: the resume passes and trains as the reference did.
d=$tmp/free
"$crl" run "$ini" $small collector.total_frames=2000 train.run_dir="$d" --quiet >/dev/null 2>&1
out=$("$crl" run --resume "$d" collector.total_frames=3000 train.eval_interval=1000 train.checkpoint_interval=700 \
      train.eval_episodes=3 optim.eps=0.00000001 --quiet 2>&1); rc=$?
if [ "$rc" -eq 0 ] && diff -r -q "$tmp/ref/checkpoint/replay" "$d/checkpoint/replay" >/dev/null \
    && diff <(cut -d, -f1,4-6,8 "$tmp/ref/metrics.csv") <(cut -d, -f1,4-6,8 "$d/metrics.csv") >/dev/null \
    && grep -qE "^  \[train\] eval_interval: 1500 .* -> 1000 \(command line\)$" "$d/run.txt" && ! grep -q "\] eps:" "$d/run.txt"
then ok "--resume changing total_frames, eval and checkpoint intervals: accepted, training as the uninterrupted run"
else nok "free changes (exit $rc)" "$out"; fi

# A total_frames that is no multiple of frames_per_batch (PPO: 1024 frames a batch) resumes.
ppo=$srcdir/../conf/examples/cartpole-ppo.ini
"$crl" run "$ppo" collector.total_frames=3000 train.run_dir="$tmp/ppo" --quiet >/dev/null 2>&1; rc=$?
out=$("$crl" run --resume "$tmp/ppo" collector.total_frames=6000 --quiet 2>&1); rc2=$?
if [ "$rc" -eq 0 ] && [ "$rc2" -eq 0 ] && grep -qE '^  frames: +6000 ' <<<"$out"
then ok "--resume of a run whose total_frames is no multiple of frames_per_batch"
else nok "total_frames 3000 of batches of 1024 (exit $rc, $rc2)" "$out"; fi

echo "1..$n"
[ "$failures" -eq 0 ]
