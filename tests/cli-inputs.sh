#!/usr/bin/env bash
# Hostile input files (issue 17): crl reads regular files only and checks sizes before reading, so a FIFO,
# a device or a directory given as a config, an experiment.ini, a checkpoint, a replay dump, a memmap storage
# file or an actions file is an error naming the file at once, never a hang; a checkpoint padded to gigabytes
# is refused from its header without being read.  And a hung worker of executor = processes is an error with
# the default step_timeout (300 s, which tests/.libs/timewarp-shim.so lets pass at once).
#
# Every command runs under `timeout` so a regression fails here instead of wedging `make check`; the
# assertions are on the exit status and the message.
set -uo pipefail
crl=${CRL:?}
srcdir=${CRL_TEST_SRCDIR:?}
builddir=${CRL_TEST_BUILDDIR:?}
n=0; failures=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
nok() { n=$((n + 1)); failures=$((failures + 1)); echo "not ok $n - $1"; shift; printf '%s\n' "$@" | sed 's/^/# /'; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/crl-inputs.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
dqn=$srcdir/../conf/examples/cartpole-dqn.ini
workers=$srcdir/../conf/examples/pendulum-workers.ini
guard=120   # seconds; only a blocked command ever reaches it

# expect RC PATTERN WHAT -- ARGS...: crl ARGS exits RC (not killed by the guard) with PATTERN (grep -E) in
# its output.
expect() {
    local want=$1 pat=$2 what=$3; shift 4
    out=$(timeout "$guard" "$crl" "$@" 2>&1 </dev/null); rc=$?
    if [ "$rc" -eq 124 ]; then
        nok "$what: still running after ${guard}s (blocked on the file?)" "$out"
    elif [ "$rc" -eq "$want" ] && grep -qE -- "$pat" <<<"$out"; then
        ok "$what"
    else
        nok "$what (exit $rc, wanted $want and /$pat/)" "$out"
    fi
}
# A path as an extended regex.
re() { sed 's/[][\.*^$+?(){}|]/\\&/g' <<<"$1"; }

# ---- configs ----
mkfifo "$tmp/fifo.ini"
f=$(re "$tmp/fifo.ini")
expect 2 "cannot read config file '$f': it is a FIFO, not a regular file" \
    "crl run FIFO: exit 2 at once naming the FIFO" -- run "$tmp/fifo.ini"
expect 2 "cannot read config file '$f': it is a FIFO, not a regular file" \
    "crl config check FIFO: exit 2 at once naming the FIFO" -- config check "$tmp/fifo.ini"
# With a writer waiting on the FIFO it is still refused: crl never reads from one.
(exec 3>"$tmp/fifo.ini"; sleep "$guard") & writer=$!
expect 2 "'$f': it is a FIFO" "a FIFO somebody writes to is refused as well" -- config check "$tmp/fifo.ini"
kill "$writer" 2>/dev/null; wait "$writer" 2>/dev/null
expect 2 "cannot read config file '/dev/zero': it is a character device, not a regular file" \
    "/dev/zero as a config: exit 2 naming it" -- run /dev/zero
expect 2 "cannot read config file '/dev/zero': it is a character device" \
    "crl config check /dev/zero: exit 2" -- config check /dev/zero
mkdir "$tmp/confdir"
expect 2 "cannot read config file '$(re "$tmp/confdir")': it is a directory, not a regular file.*name an INI file in it" \
    "a directory as a config: exit 2 naming it" -- run "$tmp/confdir"
expect 2 "it is a directory" "crl config check DIR: exit 2" -- config check "$tmp/confdir"
truncate -s 17M "$tmp/big.ini"
expect 2 "'$(re "$tmp/big.ini")': it is 17825792 bytes, more than the 16 MiB limit" \
    "a 17 MiB config is refused by its size, unread" -- config check "$tmp/big.ini"

# ---- a run directory whose files are FIFOs: --resume ----
out=$(timeout "$guard" "$crl" run "$dqn" collector.total_frames=1000 train.eval_episodes=0 \
      train.run_dir="$tmp/run" --quiet 2>&1); rc=$?
if [ "$rc" -eq 0 ] && [ -s "$tmp/run/checkpoint/trainer.ckpt" ] && [ -s "$tmp/run/checkpoint/replay/replay.ckpt" ] \
    && [ -s "$tmp/run/checkpoint/replay/storage/storage.ckpt" ]; then
    ok "a short DQN run to resume from"
else
    nok "the DQN run to resume from (exit $rc)" "$out" "$(ls -R "$tmp/run" 2>&1)"
fi
# fifo_resume FILE RC WHAT: a copy of the run with FILE replaced by a FIFO, resumed.
copies=0
fifo_resume() {
    copies=$((copies + 1))
    local file=$1 want=$2 what=$3 d=$tmp/fifo-$copies
    cp -r "$tmp/run" "$d"
    rm -f "$d/$file"
    mkfifo "$d/$file"
    expect "$want" "'?$(re "$d/$file")'?: .*it is a FIFO, not a regular file" \
        "--resume with $what a FIFO: exit $want at once naming it" -- run --resume "$d" collector.total_frames=2000 --quiet
}
fifo_resume checkpoint/experiment.ini 2 "the checkpoint's experiment.ini"
fifo_resume checkpoint/trainer.ckpt 1 "trainer.ckpt"
fifo_resume checkpoint/replay/replay.ckpt 1 "the replay buffer's dump (replay.ckpt)"
fifo_resume checkpoint/replay/storage/storage.ckpt 1 "the replay storage's dump (storage.ckpt)"

# ---- a checkpoint padded with 16 GiB of zeros (a hole: free to make) ----
# Refused from its header, before anything past it is read: under an address-space limit of half the
# file, which the same resume of the unpadded run fits in, the message is the padding, not a failed
# allocation.  The sanitizers reserve terabytes of address space for themselves: no limit then.
cp -r "$tmp/run" "$tmp/padded"
size=$(stat -c %s "$tmp/run/checkpoint/trainer.ckpt")
limit=
lib=$builddir/../core/.libs/libcrl.so.0
# (grep without -q reads all of nm's output: with pipefail an early exit would fail the pipeline.)
if ! nm -D "$lib" 2>/dev/null | grep -E '__(a|t)san_init' >/dev/null; then limit=$((8 * 1024 * 1024)); fi  # KiB
if truncate -s "+16G" "$tmp/padded/checkpoint/trainer.ckpt" 2>"$tmp/trunc.err"; then
    out=$( (if [ -n "$limit" ]; then ulimit -v "$limit"; fi
            timeout "$guard" "$crl" run --resume "$tmp/padded" collector.total_frames=2000 --quiet) 2>&1); rc=$?
    pad=$((16 * 1024 * 1024 * 1024))
    if [ "$rc" -eq 1 ] && grep -qF "$tmp/padded/checkpoint/trainer.ckpt: offset $size: $pad unexpected bytes after the section table" <<<"$out" \
        && grep -qF "cut the file back to $size bytes" <<<"$out"; then
        ok "a trainer.ckpt padded with 16 GiB: refused from its header${limit:+ under ulimit -v of 8 GiB}, naming the padding"
    else
        nok "padded trainer.ckpt (exit $rc)" "$out"
    fi
    cp -r "$tmp/run" "$tmp/unpadded"
    out=$( (if [ -n "$limit" ]; then ulimit -v "$limit"; fi
            timeout "$guard" "$crl" run --resume "$tmp/unpadded" collector.total_frames=2000 --quiet) 2>&1); rc=$?
    if [ "$rc" -eq 0 ]; then ok "the unpadded checkpoint resumes${limit:+ under the same ulimit -v}"
    else nok "the unpadded resume (exit $rc)" "$out"; fi
else
    nok "cannot make a 16 GiB sparse file in $tmp" "$(cat "$tmp/trunc.err")"
fi

# ---- memmap storage files ----
out=$(timeout "$guard" "$crl" collect "$workers" replay.storage=memmap replay.dir="$tmp/mm" --quiet 2>&1); rc=$?
if [ "$rc" -eq 0 ] && [ -s "$tmp/mm/header" ] && [ -s "$tmp/mm/leaf-000.bin" ]; then ok "a memmap storage to reopen"
else nok "memmap collect (exit $rc)" "$out"; fi
for file in header leaf-000.bin; do
    cp -r "$tmp/mm" "$tmp/mm-$file"
    rm "$tmp/mm-$file/$file"
    mkfifo "$tmp/mm-$file/$file"
    expect 1 "'$(re "$tmp/mm-$file/$file")': it is a FIFO, not a regular file.*delete" \
        "a memmap storage whose $file is a FIFO: an error naming it" \
        -- collect "$workers" replay.storage=memmap replay.dir="$tmp/mm-$file" --quiet
done

# ---- rollout --actions ----
expect 2 "--actions: cannot read actions file '$f': it is a FIFO" "rollout --actions FIFO: exit 2 naming it" \
    -- rollout env.backend=classic env.id=CartPole-v1 --steps 2 --actions "$tmp/fifo.ini"

# ---- the default step_timeout ----
expect 0 "^step_timeout = 300 +; default" "[env] step_timeout defaults to 300 s" \
    -- config show env.backend=faultenv env.id=Fault-v0 env.executor=processes
# Worker 1's env hangs at the second step (faultenv action 3).  The shim turns the executor's 300 s poll
# into 20 ms; shorter waits (the plugin scan, the workers' start-up) stay real.
printf '0 0\n0 3\n0 0\n' >"$tmp/hang.txt"
shim=$builddir/.libs/timewarp-shim.so
if [ -f "$shim" ]; then
    preload=${LD_PRELOAD:+$LD_PRELOAD:}$shim
    asan=${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0
    out=$(LD_PRELOAD=$preload ASAN_OPTIONS=$asan CRL_TIMEWARP_MIN_MS=100000 timeout "$guard" "$crl" rollout \
          env.backend=faultenv env.id=Fault-v0 env.num_envs=2 env.executor=processes env.num_workers=2 \
          --steps 3 --actions "$tmp/hang.txt" 2>&1); rc=$?
    if [ "$rc" -eq 1 ] && grep -qF "the worker of env 1 of faultenv/Fault-v0 did not finish within step_timeout = 300 s and was killed during step" <<<"$out"; then
        ok "a hung worker with the default step_timeout: exit 1 naming the env and the 300 s"
    else
        nok "hung worker with the default step_timeout (exit $rc; 124: the hang was never detected)" "$out"
    fi
else
    nok "$shim is missing: make check builds it"
fi

echo "1..$n"
[ "$failures" -eq 0 ]
