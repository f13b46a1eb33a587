#!/bin/sh
# Long kill -9 soak of storage/memmap (not part of make check): runs the
# durability case of test_replay_storage for many cycles and seeds.
#   tests/replay-soak.sh [CYCLES_PER_RUN] [RUNS]     (defaults 2000 and 5)
# Run from the build directory after `make check` (or `make
# tests/test_replay_storage plugins/replay/replay.la tests/enospc-shim.la`).
set -eu
cycles=${1:-2000}
runs=${2:-5}
build=$(pwd)
[ -x "$build/tests/test_replay_storage" ] || {
    echo "replay-soak: run me from the build directory (tests/test_replay_storage not found)" >&2
    exit 1
}
CRL_PLUGIN_PATH="$build/plugins/replay/.libs"; export CRL_PLUGIN_PATH
CRL_PLUGIN_SCANNER="$build/core/crl-plugin-scanner"; export CRL_PLUGIN_SCANNER
CRL_SYSCONFDIR="$build/tests/no-sysconf"; export CRL_SYSCONFDIR
XDG_CONFIG_HOME="$build/tests/no-xdg-config"; export XDG_CONFIG_HOME
CRL_PLUGINSDIR=; export CRL_PLUGINSDIR
CK_DEFAULT_TIMEOUT=0; export CK_DEFAULT_TIMEOUT
CRL_REPLAY_KILL_CYCLES=$cycles; export CRL_REPLAY_KILL_CYCLES
CRL_REPLAY_ONLY_KILL=1; export CRL_REPLAY_ONLY_KILL
i=1
while [ "$i" -le "$runs" ]; do
    seed=$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')
    echo "replay-soak: run $i of $runs, $cycles kill -9 cycles, seed $seed"
    CRL_REPLAY_KILL_SEED=$seed "$build/tests/test_replay_storage" || {
        echo "replay-soak: FAILED with seed $seed (rerun: CRL_REPLAY_KILL_SEED=$seed)" >&2
        exit 1
    }
    i=$((i + 1))
done
echo "replay-soak: $runs runs of $cycles cycles passed"
