#!/usr/bin/env bash
# The whole test suite: every Check suite and shell test (make check), then
# make distcheck.  Ends with one line "tests: N passed, N failed" counted from
# the suites' own reports.
set -uo pipefail
build=${1:?usage: tests/run-all.sh BUILD_DIR}
status=0
make -C "$build" -j"$(nproc)" check || status=1

passed=0; failed=0
for log in "$build"/tests/*.log; do
    [ -f "$log" ] || continue
    # Check's summary: "100%: Checks: 12, Failures: 0, Errors: 0"
    line=$(grep -E '^[0-9]+%: Checks: [0-9]+, Failures: [0-9]+, Errors: [0-9]+' "$log" | tail -n 1)
    if [ -n "$line" ]; then
        n=$(sed -E 's/.*Checks: ([0-9]+).*/\1/' <<<"$line")
        f=$(sed -E 's/.*Failures: ([0-9]+), Errors: ([0-9]+).*/\1+\2/' <<<"$line")
        f=$((f))
        passed=$((passed + n - f)); failed=$((failed + f))
    else
        # Shell tests report "ok N" / "not ok N" lines (TAP-like).
        passed=$((passed + $(grep -c '^ok ' "$log" || true)))
        failed=$((failed + $(grep -c '^not ok ' "$log" || true)))
    fi
done
for trs in "$build"/tests/*.trs; do
    [ -f "$trs" ] || continue
    if grep -q ':test-result: FAIL\|:test-result: ERROR' "$trs"; then
        log=${trs%.trs}.log
        echo "---- $(basename "$log") ----"; tail -n 40 "$log"
    fi
done

if [ "${CRL_SKIP_DISTCHECK:-0}" != 1 ]; then
    make -C "$build" -j"$(nproc)" distcheck >"$build/distcheck.out" 2>&1 && passed=$((passed + 1)) || {
        failed=$((failed + 1)); status=1; echo "---- distcheck ----"; tail -n 60 "$build/distcheck.out"; }
fi
echo "tests: $passed passed, $failed failed"
[ "$failed" -eq 0 ] || status=1
exit $status
