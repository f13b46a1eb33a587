#!/usr/bin/env bash
# tests/fuzz/run-fuzz.sh: builds the fuzz targets of crl's file loaders with clang's libFuzzer (ASan + UBSan) and runs each for N seconds.
#
#   tests/fuzz/run-fuzz.sh [SECONDS] [TARGET...]     (or `make fuzz FUZZ_SECONDS=N` from a build dir)
#
# Targets: checkpoint (crl_ckpt_reader_open_buffer, every section, every
# TensorDict), replay_load (crl_replay_load with the input as the
# manifest), registry_cache (the plugin registry cache reader, compiled in
# with its hidden crl__ internals), trainer (crl_trainer_load: the trainer's,
# optimizers' and DQN/PPO losses' sections) and storage_load (the list and
# tensor storages' dump loaders); default all.  libcrl and the replay and
# losses plugins are built
# instrumented in FUZZ_BUILD_DIR (default ./_fuzz); the seed corpus in
# tests/fuzz/corpus/TARGET is copied to FUZZ_BUILD_DIR/corpus-TARGET, which
# grows across runs.  Crashes land in FUZZ_BUILD_DIR as crash-* files: add
# them to tests/fuzz/corpus/TARGET once fixed, so make check replays them.
# CC_FUZZ picks the compiler (default clang); FUZZ_MAKE_LOCK, when set,
# names a lock file the make step takes (shared source trees).
set -euo pipefail

src=$(cd "$(dirname "$0")/../.." && pwd)
secs=${1:-60}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(checkpoint replay_load registry_cache trainer storage_load)
cc=${CC_FUZZ:-clang}
bd=${FUZZ_BUILD_DIR:-$PWD/_fuzz}

command -v "$cc" >/dev/null || { echo "run-fuzz: $cc not found: install clang (Debian: apt-get install clang)" >&2; exit 2; }
mkdir -p "$bd"
bd=$(cd "$bd" && pwd)
printf '#include <stdint.h>\n#include <stddef.h>\nint LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }\n' >"$bd/probe.c"
if ! "$cc" -fsanitize=fuzzer,address,undefined "$bd/probe.c" -o "$bd/probe" 2>"$bd/probe.log"; then
    echo "run-fuzz: $cc cannot link with -fsanitize=fuzzer: this clang lacks libFuzzer (compiler-rt)." >&2
    echo "run-fuzz: install it (Debian: libclang-rt-<version>-dev, or a clang package that ships libclang_rt.fuzzer)." >&2
    sed 's/^/  /' "$bd/probe.log" >&2
    exit 2
fi

# libcrl and the replay and losses plugins, instrumented for coverage and sanitized.
if [ ! -f "$bd/lib/Makefile" ]; then
    mkdir -p "$bd/lib"
    (cd "$bd/lib" && "$src/configure" -q CC="$cc" CFLAGS="-g -O1 -fno-omit-frame-pointer -fsanitize=fuzzer-no-link" \
        --enable-sanitizers --disable-tests --disable-classic --without-python --disable-gym)
fi
make_cmd=(make -C "$bd/lib" -j"$(nproc)" --no-print-directory core/libcrl.la plugins/replay/replay.la
          plugins/losses/losses.la)
if [ -n "${FUZZ_MAKE_LOCK:-}" ]; then flock "$FUZZ_MAKE_LOCK" "${make_cmd[@]}"; else "${make_cmd[@]}"; fi

lib="$bd/lib/core/.libs"
flags=(-g -O1 -fno-omit-frame-pointer -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
       -I"$src/plugin-sdk/include" -I"$src/core/include")
export CRL_FUZZ_REPLAY_PLUGIN="$bd/lib/plugins/replay/.libs/replay.so"
export CRL_FUZZ_LOSSES_PLUGIN="$bd/lib/plugins/losses/.libs/losses.so"
# Full malloc stacks: GLib has no frame pointers, so the fast unwinder stops
# at g_malloc and a leak report could name neither crl's code nor GLib's own
# by-design quark leak (lsan-fuzz.supp).  FUZZ_FAST=1 trades leak detection
# for about 5x the executions per second.
if [ -n "${FUZZ_FAST:-}" ]; then
    export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}
else
    export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:fast_unwind_on_malloc=0}
fi
export LSAN_OPTIONS="suppressions=$src/tests/fuzz/lsan-fuzz.supp:print_suppressions=0"

status=0
for t in "${targets[@]}"; do
    case "$t" in
        checkpoint|replay_load|trainer|storage_load) extra=() ;;
        # crl__ symbols are hidden in libcrl: the loader's sources are built into the target.
        registry_cache) extra=(-I"$src/core" -I"$bd/lib" $(pkg-config --cflags glib-2.0)
                               "$src/core/scan_record.c" "$src/core/registry_cache.c" "$src/core/file_read.c"
                               $(pkg-config --libs glib-2.0)) ;;
        *) echo "run-fuzz: unknown target '$t' (checkpoint, replay_load, registry_cache, trainer, storage_load)" >&2
           exit 2 ;;
    esac
    "$cc" "${flags[@]}" "$src/tests/fuzz/fuzz_$t.c" ${extra[@]+"${extra[@]}"} -o "$bd/fuzz_$t" -L"$lib" -lcrl -Wl,-rpath,"$lib"
    mkdir -p "$bd/corpus-$t"
    cp -n "$src/tests/fuzz/corpus/$t"/* "$bd/corpus-$t/" 2>/dev/null || true
    echo "run-fuzz: $t for ${secs}s (corpus $bd/corpus-$t)"
    (cd "$bd" && "./fuzz_$t" -max_total_time="$secs" -max_len=16384 -rss_limit_mb=2048 -timeout=10 \
        -print_final_stats=1 "corpus-$t") 2>&1 | tee "$bd/fuzz_$t.log" | grep -E '^(#[0-9]+ +(INITED|DONE|pulse)|Done |stat::number_of_executed_units|stat::peak_rss_mb|==[0-9]+==ERROR|SUMMARY|artifact_prefix|Test unit written)' || true
    if grep -q 'Test unit written\|==ERROR\|SUMMARY: ' "$bd/fuzz_$t.log"; then
        echo "run-fuzz: $t FOUND A PROBLEM; see $bd/fuzz_$t.log and the crash-* file in $bd" >&2
        status=1
    fi
done
exit $status
