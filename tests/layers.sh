#!/usr/bin/env bash
# crl's layers on the built objects (core/LAYERS, DESIGN.md "Layers"): no file uses a higher layer, no
# circle of files or of concepts spans two concepts, every object is mapped.  See tests/layers.py; its
# --picture mode draws the concept graph.  Then the checker itself, on a made-up build.
set -uo pipefail
top_src=$(cd "${CRL_TEST_SRCDIR:?}/.." && pwd)
top_build=$(cd "${CRL_TEST_BUILDDIR:?}/.." && pwd)
if ! command -v python3 >/dev/null; then
    echo "1..0 # SKIP no python3"
    exit 77
fi
checker=$top_src/tests/layers.py
python3 "$checker" --map "$top_src/core/LAYERS" "$top_build"
status=$?

# A made-up build: low.c and high.c use each other, and stray.c is in no concept of the first map.
failures=0
nok() { failures=$((failures + 1)); echo "# self-test failed: $1"; shift; printf '%s\n' "$@" | sed 's/^/#   /'; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/src/core" "$tmp/build/core/.libs"
printf 'int high_fn(void);\nint low_fn(void) { return 1; }\nint low_calls(void) { return high_fn(); }\n' \
    > "$tmp/src/core/low.c"
printf 'int low_fn(void);\nint high_fn(void) { return low_fn() + 1; }\n' > "$tmp/src/core/high.c"
printf 'int stray_fn(void) { return 3; }\n' > "$tmp/src/core/stray.c"
for f in low high stray; do
    ${CC:-cc} -c -o "$tmp/build/core/.libs/core_libcrl_la-$f.o" "$tmp/src/core/$f.c" || nok "cannot compile $f.c"
    : > "$tmp/build/core/core_libcrl_la-$f.lo"
done
printf 'layers: data runtime\ndata low low.c\nruntime high high.c\n' > "$tmp/src/core/LAYERS"
out=$(python3 "$checker" --map "$tmp/src/core/LAYERS" "$tmp/build" 2>&1)
rc=$?
[ $rc -eq 1 ] || nok "a broken map: exit $rc, wanted 1" "$out"
for want in "not ok 1 .*" "# stray.c: no concept in $tmp/src/core/LAYERS lists it; .*" \
            "# low.c \(low, data\) uses high.c \(high, runtime\): high_fn" \
            "# circle of 2 files across concepts high, low: high.c low.c" "#   high.c -> low.c: low_fn" \
            "# circle of concepts: high, low"; do
    grep -qE -- "^$want\$" <<<"$out" || nok "a broken map: no line '$want'" "$out"
done
# One concept may hold a circle; every file mapped.
printf 'layers: data\ndata both low.c high.c\ndata stray stray.c\n' > "$tmp/src/core/LAYERS"
out=$(python3 "$checker" --map "$tmp/src/core/LAYERS" "$tmp/build" 2>&1)
rc=$?
[ $rc -eq 0 ] && ! grep -q "not ok" <<<"$out" || nok "a sound map: exit $rc, wanted 0" "$out"
out=$(python3 "$checker" --picture --map "$tmp/src/core/LAYERS" "$tmp/build" 2>&1)
grep -qE '^  both +-> -$' <<<"$out" || nok "--picture of a sound map" "$out"
[ $failures -eq 0 ] && echo "# the checker's self-tests passed"
[ $status -eq 0 ] && [ $failures -eq 0 ]
