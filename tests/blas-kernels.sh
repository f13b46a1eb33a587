#!/usr/bin/env bash
# The suites whose results pass through matrix products, once more under every OpenBLAS kernel family
# this OpenBLAS build offers and this CPU can execute (OPENBLAS_CORETYPE forces one), and once as on a CPU
# without AVX and FMA (Nehalem kernels, glibc's libm on its plain paths through GLIBC_TUNABLES).  OpenBLAS picks a
# kernel per CPU, and kernels differ in rounding and in what they allocate, so a test that holds for one
# kernel only would pass on some machines and fail on others; here it fails on any machine that can run
# the kernel it breaks under.  `crl version` reports the kernel in use, so a kernel the build lacks (OpenBLAS
# then falls back to its own choice) is reported as skipped, not run twice.
set -uo pipefail
crl=${CRL:?}
builddir=${CRL_TEST_BUILDDIR:?}
n=0; failures=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
nok() { n=$((n + 1)); failures=$((failures + 1)); echo "not ok $n - $1"; shift; printf '%s\n' "$@" | sed 's/^/# /'; }
skip() { echo "# skipped: $1"; }

suites=(test_nn test_optim test_distributions test_actor test_value test_nn_alloc test_losses test_trainer)

# Which kernel families this CPU can execute, from the instruction sets each one uses.
flags=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2) "
has() { local f; for f in "$@"; do [[ $flags == *" $f "* ]] || return 1; done; }
kernels=()
has pni && kernels+=(Prescott)
has sse4_2 && kernels+=(Nehalem)
has avx && kernels+=(SandyBridge)
has avx2 fma && kernels+=(Haswell Zen)
has avx512f avx512cd avx512bw avx512dq avx512vl && kernels+=(SkylakeX)
has avx512f avx512cd avx512bw avx512dq avx512vl avx512_bf16 && kernels+=(Cooperlake)
echo "# CPU can execute: ${kernels[*]}"
echo "# default: $("$crl" version | grep '^BLAS:')"

# run_suites VAR=VALUE...: every suite with those variables set.
run_suites() {
    local s out rc
    for s in "${suites[@]}"; do
        out=$(env "$@" "$builddir/$s" 2>&1); rc=$?
        case $rc in
            0) ok "$s with $*" ;;
            77) skip "$s with $*: the suite skips itself in this build" ;;
            *) nok "$s with $* (exit $rc)" "$(tail -n 20 <<<"$out")" ;;
        esac
    done
}

for k in "${kernels[@]}"; do
    active=$(OPENBLAS_CORETYPE=$k "$crl" version | sed -n 's/^BLAS: .*; kernel \([A-Za-z0-9]*\).*/\1/p')
    if [ -z "$active" ]; then
        skip "kernel $k: the BLAS library is not OpenBLAS"; continue
    fi
    if [ "${active,,}" != "${k,,}" ]; then
        skip "kernel $k: this OpenBLAS build does not offer it (OPENBLAS_CORETYPE=$k gives $active)"; continue
    fi
    run_suites "OPENBLAS_CORETYPE=$k"
done
if [[ " ${kernels[*]} " == *" Nehalem "* ]]; then
    run_suites "OPENBLAS_CORETYPE=Nehalem" "GLIBC_TUNABLES=glibc.cpu.hwcaps=-AVX2,-FMA,-AVX512F,-AVX"
fi
[ ${#kernels[@]} -gt 0 ] || nok "no OpenBLAS kernel family found for this CPU" "flags:$flags"
echo "1..$n"
[ "$failures" -eq 0 ]
