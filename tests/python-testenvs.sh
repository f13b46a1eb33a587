#!/bin/sh
# Self-test of the pure-Python Gymnasium test envs (tests/python/), run with
# Debian's interpreter, the one the gym plugin embeds.  Skips (77) without
# numpy.
py=/usr/bin/python3
[ -x "$py" ] && "$py" -c 'import numpy' 2>/dev/null || { echo "numpy for $py not found: skipped"; exit 77; }
out=$(PYTHONDONTWRITEBYTECODE=1 "$py" -m unittest discover -s "${CRL_TEST_SRCDIR:?}/python" -p 'test_*.py' 2>&1)
rc=$?
printf '%s\n' "$out"
# Report in the suite's TAP-like form for tests/run-all.sh's count.
ran=$(printf '%s\n' "$out" | sed -n 's/^Ran \([0-9]*\) tests\{0,1\}.*/\1/p')
if [ $rc -eq 0 ]; then i=0; while [ "$i" -lt "${ran:-0}" ]; do i=$((i + 1)); echo "ok $i - unittest"; done; else echo "not ok 1 - unittest (exit $rc)"; fi
exit $rc
