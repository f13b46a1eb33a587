#!/usr/bin/env bash
# Shell tests of crl run's mpi backend on localhost ([distributed] backend = mpi under mpirun, ranks
# oversubscribed): sync runs byte for byte equal to one process with num_collectors = K-1 (DQN and PPO on
# CartPole: checkpoint, replay buffer, metrics), --resume of sync runs byte for byte the same (and of
# async ones refused; of an LSTM policy's, its state recomputed and said so), an async run, and the failures: outside mpirun, a
# num_collectors that disagrees with the ranks, a collector rank that errs, one killed, one stopped.
# Skipped (exit 77) when crl was built without Open MPI.
set -uo pipefail
crl=${CRL:?}
srcdir=${CRL_TEST_SRCDIR:?}
if [ -z "${CRL_MPIRUN:-}" ]; then
    echo "SKIP: crl was built without Open MPI (install libopenmpi-dev and openmpi-bin, configure --with-mpi)"
    exit 77
fi
n=0; failures=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
nok() { n=$((n + 1)); failures=$((failures + 1)); echo "not ok $n - $1"; shift; printf '%s\n' "$@" | sed 's/^/# /'; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
# Open MPI refuses root without these; sanitizer builds: Open MPI's own allocations are not ours to report.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export ASAN_OPTIONS=${ASAN_OPTIONS:-}:detect_leaks=0
mpirun() { timeout 60 "$CRL_MPIRUN" --oversubscribe -x CRL_PLUGIN_PATH -x CRL_PLUGIN_SCANNER "$@"; }
dqn=$srcdir/../conf/examples/cartpole-dqn.ini
ppo=$srcdir/../conf/examples/cartpole-ppo.ini
dshort="collector.total_frames=1500 collector.init_random_frames=200 train.eval_interval=0 train.eval_episodes=2 train.log_interval=300 --quiet"
pshort="collector.frames_per_batch=512 collector.total_frames=1536 distributed.sync_interval=3 train.eval_interval=0 train.eval_episodes=2 train.log_interval=512 --quiet"

out=$("$crl" run "$dqn" distributed.backend=mpi $dshort train.run_dir="$tmp/outside" 2>&1); rc=$?
if [ "$rc" -eq 2 ] && grep -qF 'command line: [distributed] backend = mpi, but crl run was not started by mpirun' <<<"$out" \
    && [ ! -e "$tmp/outside" ]
then ok "backend = mpi outside mpirun: exit 2 naming where backend was set, no run directory"
else nok "outside mpirun (exit $rc)" "$out"; fi

same() {  # run dirs $1 $2: checkpoint and replay byte for byte, metrics but for seconds and fps
    cmp -s "$1/checkpoint/trainer.ckpt" "$2/checkpoint/trainer.ckpt" \
        && { [ ! -e "$1/checkpoint/replay" ] || diff -r "$1/checkpoint/replay" "$2/checkpoint/replay" >/dev/null 2>&1; } \
        && diff <(cut -d, -f1,4-8 "$1/metrics.csv") <(cut -d, -f1,4-8 "$2/metrics.csv") >/dev/null && [ "$(wc -l <"$1/metrics.csv")" -gt 2 ]
}
"$crl" run "$dqn" collector.num_collectors=2 $dshort train.run_dir="$tmp/dqn1" >/dev/null 2>&1
out=$(mpirun -np 3 "$crl" run "$dqn" distributed.backend=mpi $dshort train.run_dir="$tmp/dqn3" 2>&1); rc=$?
if [ "$rc" -eq 0 ] && same "$tmp/dqn1" "$tmp/dqn3" && grep -qE '^  mpi: +2 collector ranks; [0-9]+ batches' <<<"$out"
then ok "DQN, mpirun -np 3 sync: checkpoint, replay buffer and metrics byte for byte those of one process with num_collectors = 2"
else nok "DQN sync (exit $rc)" "$out" "$(diff <(cut -d, -f1,4-8 "$tmp/dqn1/metrics.csv") <(cut -d, -f1,4-8 "$tmp/dqn3/metrics.csv") 2>&1)"; fi

"$crl" run "$ppo" collector.num_collectors=2 $pshort train.run_dir="$tmp/ppo1" >/dev/null 2>&1
out=$(mpirun -np 3 "$crl" run "$ppo" distributed.backend=mpi $pshort train.run_dir="$tmp/ppo3" 2>&1); rc=$?
if [ "$rc" -eq 0 ] && same "$tmp/ppo1" "$tmp/ppo3"
then ok "PPO, mpirun -np 3 sync, sync_interval = 3: checkpoint and metrics byte for byte those of one process"
else nok "PPO sync (exit $rc)" "$out"; fi

# --resume under mpirun: the learner hands each rank its recorded actions to re-collect with, then its
# policy copy's stream and the last sync's weights; N + N equals 2N and the one-process run.
mpirun -np 3 "$crl" run "$dqn" distributed.backend=mpi $dshort collector.total_frames=600 train.run_dir="$tmp/dqnr" >/dev/null 2>&1
out=$(mpirun -np 3 "$crl" run --resume "$tmp/dqnr" collector.total_frames=1500 --quiet 2>&1); rc=$?
if [ "$rc" -eq 0 ] && same "$tmp/dqn1" "$tmp/dqnr" && grep -q '^resumed at frame 600' "$tmp/dqnr/run.txt"
then ok "DQN, mpirun -np 3 sync, 600 + 900 frames through --resume: byte for byte one process's 1500"
else nok "DQN resume (exit $rc)" "$out"; fi
mpirun -np 3 "$crl" run "$ppo" distributed.backend=mpi $pshort collector.total_frames=1024 train.run_dir="$tmp/ppor" >/dev/null 2>&1
out=$(mpirun -np 3 "$crl" run --resume "$tmp/ppor" collector.total_frames=1536 --quiet 2>&1); rc=$?
if [ "$rc" -eq 0 ] && same "$tmp/ppo1" "$tmp/ppor"
then ok "PPO, mpirun -np 3 sync, sync_interval = 3, 1024 + 512 frames through --resume: byte for byte one process's 1536"
else nok "PPO resume (exit $rc)" "$out"; fi
# A recurrent policy's carried state stays in the collector ranks: the resume recomputes it (not bitwise) and
# says so.
lstm=$srcdir/../conf/examples/cartpole-masked-lstm-ppo.ini
lshort="collector.frames_per_batch=256 env.num_envs=4 collector.num_collectors=2 distributed.backend=mpi
        train.minibatch_size=64 train.eval_interval=0 train.eval_episodes=1 transform.norm.init_stats=50 --quiet"
mpirun -np 3 "$crl" run "$lstm" $lshort collector.total_frames=512 train.run_dir="$tmp/lstmr" >/dev/null 2>&1
out=$(mpirun -np 3 "$crl" run --resume "$tmp/lstmr" collector.total_frames=1024 --quiet 2>&1); rc=$?
if [ "$rc" -eq 0 ] && grep -qF "the collector ranks' carried state is not checkpointed under mpirun, so re-collecting recomputed the state the policy carries (recurrent_state_c, recurrent_state_h)" <<<"$out" \
    && grep -qE '^  frames: +1024 ' <<<"$out"
then ok "LSTM PPO, mpirun -np 3, 512 + 512 frames through --resume: resumes, saying the carried state was recomputed"
else nok "LSTM resume under mpirun (exit $rc)" "$out"; fi
out=$(mpirun -np 2 "$crl" run --resume "$tmp/dqnr" collector.total_frames=3000 --quiet 2>&1); rc=$?
if [ "$rc" -eq 2 ] && grep -qF 'num_collectors = 2, but mpirun started 1 collector rank (-np 2)' <<<"$out"
then ok "--resume with fewer ranks than the checkpointed run: exit 2, no hang"
else nok "resume with other ranks (exit $rc)" "$out"; fi

out=$(mpirun -np 3 "$crl" run "$dqn" distributed.backend=mpi collector.sync=false $dshort train.run_dir="$tmp/async" 2>&1); rc=$?
if [ "$rc" -eq 0 ] && grep -qE '^  frames: +1500 ' <<<"$out" && grep -qE '^  mpi: +2 collector ranks; 150 batches' <<<"$out" \
    && [ -s "$tmp/async/checkpoint/trainer.ckpt" ]
then ok "async (sync = false): every batch as it comes, 1500 frames in 150 batches of 10"
else nok "async (exit $rc)" "$out"; fi
out=$(mpirun -np 3 "$crl" run --resume "$tmp/async" collector.total_frames=3000 --quiet 2>&1); rc=$?
if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && grep -qF 'an asynchronous run ([collector] sync = false) cannot be resumed' <<<"$out"
then ok "--resume of an async run is refused with the reason, no hang"
else nok "async resume (exit $rc)" "$out"; fi
out=$("$crl" run "$dqn" collector.sync=false collector.num_collectors=2 $dshort train.run_dir="$tmp/async1" 2>&1); rc=$?
if [ "$rc" -eq 2 ] && grep -qF 'sync = false: training with asynchronous sub-collectors needs them in other processes' <<<"$out"
then ok "async sub-collectors in one process are refused (exit 2)"
else nok "async in one process (exit $rc)" "$out"; fi

out=$(mpirun -np 3 "$crl" run "$dqn" distributed.backend=mpi collector.num_collectors=3 $dshort train.run_dir="$tmp/k" 2>&1); rc=$?
if [ "$rc" -eq 2 ] && grep -qF 'command line: [collector] num_collectors = 3, but mpirun started 2 collector ranks (-np 3)' <<<"$out" \
    && [ "$(grep -c 'num_collectors = 3, but' <<<"$out")" -eq 1 ] && [ ! -e "$tmp/k" ]
then ok "num_collectors against the ranks: exit 2, said once (by rank 0)"
else nok "num_collectors mismatch (exit $rc)" "$out"; fi

# faultenv's action 2 fails the step in the process that made the env: a collector rank errs.
out=$(mpirun -np 3 "$crl" run "$dqn" distributed.backend=mpi env.backend=faultenv env.id=Fault-v0 $dshort train.run_dir="$tmp/err" 2>&1); rc=$?
if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && grep -qE '^crl run: stopped: mpi: collector rank [12] \(sub-collector [01]\) failed: .*faultenv' <<<"$out"
then ok "a collector rank that fails ends the job naming the rank and the reason"
else nok "collector error (exit $rc)" "$out"; fi

# Rank 2 of an endless run, once the learner logged: its pid among mpirun's children.
rank_pid() {
    local p
    for p in /proc/[0-9]*; do
        tr '\0' '\n' <"$p/cmdline" 2>/dev/null | grep -qxF "train.run_dir=$1" || continue
        tr '\0' '\n' <"$p/environ" 2>/dev/null | grep -qx 'OMPI_COMM_WORLD_RANK=2' && { basename "$p"; return 0; }
    done
    return 1
}
start_endless() {  # $1 run dir, $2 log, more args
    local d=$1 log=$2; shift 2
    mpirun -np 3 "$crl" run "$dqn" distributed.backend=mpi collector.total_frames=-1 train.eval_episodes=0 \
        train.log_interval=100 --quiet "$@" train.run_dir="$d" >"$log" 2>&1 &
    mpid=$!
    for _ in $(seq 600); do
        [ "$(cat "$d/metrics.csv" 2>/dev/null | wc -l)" -ge 3 ] && pid=$(rank_pid "$d" 2>/dev/null) && return 0
        sleep 0.1
    done
    return 1
}
if start_endless "$tmp/kill" "$tmp/kill.log"; then
    kill -9 "$pid"; wait "$mpid"; rc=$?
    if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && grep -qE 'rank 2 .*signal 9' "$tmp/kill.log"
    then ok "a collector rank killed with SIGKILL ends the job, naming the rank and the signal"
    else nok "killed rank (exit $rc)" "$(cat "$tmp/kill.log")"; fi
else kill "$mpid" 2>/dev/null; wait "$mpid"; nok "killed rank: the run did not start" "$(cat "$tmp/kill.log")"; fi

if start_endless "$tmp/stop" "$tmp/stop.log" distributed.timeout=2; then
    kill -STOP "$pid"; wait "$mpid"; rc=$?
    kill -CONT "$pid" 2>/dev/null; kill -9 "$pid" 2>/dev/null
    if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && grep -qE 'mpi: collector rank 2 (sent nothing|took no request) within \[distributed\] timeout = 2 s' "$tmp/stop.log"
    then ok "a silent collector rank (SIGSTOP) ends the job after [distributed] timeout, naming the rank"
    else nok "stopped rank (exit $rc)" "$(cat "$tmp/stop.log")"; fi
else kill "$mpid" 2>/dev/null; wait "$mpid"; nok "stopped rank: the run did not start" "$(cat "$tmp/stop.log")"; fi

echo "1..$n"
[ "$failures" -eq 0 ]
