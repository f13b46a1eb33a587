#!/usr/bin/env bash
# Shell tests of `crl collect` (the collectors over every executor, through the
# examples) and `crl bench batched`.
set -uo pipefail
crl=${CRL:?}
srcdir=${CRL_TEST_SRCDIR:?}
n=0; failures=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
nok() { n=$((n + 1)); failures=$((failures + 1)); echo "not ok $n - $1"; shift; printf '%s\n' "$@" | sed 's/^/# /'; }
cp_ini=$srcdir/../conf/examples/cartpole-collect.ini
pw_ini=$srcdir/../conf/examples/pendulum-workers.ini

# ---- the CartPole example, on every executor: same seed, same frames, same episodes
ref=
for ex in threads serial processes; do
    out=$("$crl" collect "$cp_ini" env.executor=$ex 2>&1); rc=$?
    eps=$(sed -n 's/^  episodes completed: //p' <<<"$out")
    ret=$(sed -n 's/^  mean return: *//p' <<<"$out")
    if [ "$rc" -eq 0 ] && grep -qF 'batch_size=torch.Size([8, 100])' <<<"$out" && grep -qE '^  frames: +8000 in' <<<"$out" \
        && grep -qF 'traj_ids: Tensor' <<<"$out" && [ -n "$eps" ] && [ "$eps" -gt 0 ]
    then ok "collect cartpole-collect.ini with executor = $ex: 10 batches [8, 100], $eps episodes"
    else nok "collect with executor = $ex (exit $rc)" "$out"; fi
    if [ -z "$ref" ]; then ref="$eps $ret"
    elif [ "$ref" = "$eps $ret" ]; then ok "executor = $ex completes the same episodes with the same mean return as threads"
    else nok "executor = $ex differs from threads: '$eps $ret' vs '$ref'"; fi
done

# multi collectors: sync stacks [2, 8, 50], async hands out [8, 100] with collector.worker
out=$("$crl" collect "$cp_ini" collector.num_collectors=2 2>&1); rc=$?
if [ "$rc" -eq 0 ] && grep -qF 'batch_size=torch.Size([2, 8, 50])' <<<"$out" && grep -qE '^  frames: +8000 in' <<<"$out"
then ok "num_collectors = 2, sync: batches [2, 8, 50]"
else nok "num_collectors = 2 (exit $rc)" "$out"; fi
out=$("$crl" collect "$cp_ini" collector.num_collectors=2 collector.sync=false 2>&1); rc=$?
if [ "$rc" -eq 0 ] && grep -qF 'worker: Tensor' <<<"$out" && grep -qE '^  frames: +8000 in' <<<"$out"
then ok "num_collectors = 2, async: collector.worker, 8000 frames"
else nok "num_collectors = 2 async (exit $rc)" "$out"; fi

# ---- worker processes with per-env gravity, worker and parent transforms, a replay buffer
out=$("$crl" collect "$pw_ini" 2>&1); rc=$?
if [ "$rc" -eq 0 ] && grep -qF 'step_count' <<<"$out" && grep -qF 'episode_reward' <<<"$out" \
    && grep -qE '^  replay buffer: +4000 items' <<<"$out"
then ok "collect pendulum-workers.ini: step_count (workers), episode_reward (parent), 4000 items in the buffer"
else nok "collect pendulum-workers.ini (exit $rc)" "$out"; fi

# ---- bad input: exit 2 with the file, line or key named
out=$("$crl" collect "$cp_ini" collector.frames_per_batch=801 2>&1); rc=$?
if [ "$rc" -eq 2 ] && grep -qF 'frames_per_batch = 801' <<<"$out" && grep -qF 'num_envs = 8' <<<"$out"
then ok "frames_per_batch not a multiple of num_envs: exit 2, both named"
else nok "frames_per_batch = 801 (exit $rc, wanted 2)" "$out"; fi
out=$("$crl" collect "$cp_ini" collector.total_frames=-1 2>&1); rc=$?
if [ "$rc" -eq 2 ] && grep -qF 'total_frames' <<<"$out"
then ok "endless total_frames refused by crl collect: exit 2"
else nok "total_frames = -1 (exit $rc, wanted 2)" "$out"; fi
out=$("$crl" collect env.backend=classic env.id=CartPole-v1 2>&1); rc=$?
if [ "$rc" -eq 2 ] && grep -qF 'no [collector] section' <<<"$out"
then ok "no [collector]: exit 2"
else nok "no [collector] (exit $rc, wanted 2)" "$out"; fi
out=$("$crl" collect "$cp_ini" env.batch_size=4 2>&1); rc=$?
if [ "$rc" -eq 2 ] && grep -qF 'batch_size = 4 < num_envs = 8 makes the env async' <<<"$out" \
    && grep -qF 'drop batch_size' <<<"$out"
then ok "an async env under a collector: a config error (exit 2) before any step"
else nok "collector over an async env (exit $rc)" "$out"; fi
out=$("$crl" collect "$cp_ini" env.executor=procs 2>&1); rc=$?
if [ "$rc" -eq 2 ] && grep -qF 'executor' <<<"$out" && grep -qF 'processes' <<<"$out"
then ok "a misspelt executor: exit 2, the choices named"
else nok "env.executor=procs (exit $rc, wanted 2)" "$out"; fi

# ---- crl bench batched runs and prints ratios to serial and the start-up time
out=$("$crl" bench batched --seconds 0.01 2>&1); rc=$?
if [ "$rc" -eq 0 ] && grep -qE 'CartPole-v1 +1024 .*\(1\.00x\)' <<<"$out" && grep -qF 'async batch_size 512' <<<"$out" \
    && grep -qE 'processes start-up .* median [0-9.]+ ms' <<<"$out"
then ok "crl bench batched prints every executor with ratios, async rows and the start-up time"
else nok "crl bench batched (exit $rc)" "$out"; fi
# With the dm_control plugin on the path: its tasks' rows, sync and async, and a task it lacks skipped by name.
if grep -q 'dm_control tasks: unavailable' <<<"$out"; then ok "crl bench batched: dm_control not built (skipped)"
elif grep -qE 'cheetah/run +32 .*\(1\.00x\)' <<<"$out" && grep -qE 'walker/walk +8 +threads sync .* async batch_size 4' <<<"$out" \
    && { grep -qE 'humanoid/walk +8 ' <<<"$out" || grep -qF "humanoid/walk  (not in this build's dm_control plugin)" <<<"$out"; }
then ok "crl bench batched measures the executors on dm_control tasks"
else nok "crl bench batched dm_control rows" "$out"; fi
# ... and with a policy in the loop: its cost next to the env's, serial, threads and async with the ceiling.
if grep -q 'dm_control tasks: unavailable' <<<"$out"; then ok "crl bench batched: no policy rows without dm_control (skipped)"
elif grep -qF 'policy in the loop (TD3/DDPG actor: MLP [256, 256] ReLU' <<<"$out" \
    && grep -qE 'walker/walk +8 +E [0-9.]+ us +P [0-9.]+ us at batch 8 \(P/E [0-9.]+\), [0-9.]+ us at 4, [0-9.]+ us at 2$' <<<"$out" \
    && grep -qE 'cheetah/run +32 +serial [0-9.]+k? +threads [0-9.]+k? \([0-9.]+x serial\) +async batch_size 16: [0-9.]+k? \([0-9.]+x sync; ceiling [0-9.]+x\) +async batch_size 8: ' <<<"$out"
then ok "crl bench batched measures dm_control tasks with a policy in the loop"
else nok "crl bench batched policy rows" "$out"; fi

echo "1..$n"
[ "$failures" -eq 0 ]
