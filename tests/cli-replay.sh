#!/usr/bin/env bash
# Shell tests of `crl replay check|repair DIR` and of what a damaged memmap
# storage does to the commands that open it: a flipped byte and a missing
# header are errors naming the directory, file and slot, never items dropped
# in silence.
set -uo pipefail
crl=${CRL:?}
srcdir=${CRL_TEST_SRCDIR:?}
n=0; failures=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
nok() { n=$((n + 1)); failures=$((failures + 1)); echo "not ok $n - $1"; shift; printf '%s\n' "$@" | sed 's/^/# /'; }
ini=$srcdir/../conf/examples/cartpole-collect.ini
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
mm=$tmp/mm
# 2400 frames into a memmap buffer of 3000 slots.
collect() { "$crl" collect "$ini" replay.storage=memmap "replay.dir=$1" replay.capacity=3000 collector.total_frames=2400; }
# Checksums of every file of a storage but its lock.
sums() { (cd "$1" && md5sum header leaf-*.bin slots.bin 2>/dev/null); }
flip() { # flip FILE OFFSET: xor one byte with 0x5a
    local b; b=$(od -An -tu1 -j "$2" -N1 "$1" | tr -d ' ')
    printf "$(printf '\\%03o' $(( b ^ 0x5a )))" | dd of="$1" bs=1 seek="$2" conv=notrunc status=none
}

out=$(collect "$mm" 2>&1); rc=$?
if [ "$rc" -eq 0 ] && grep -qE '^  replay buffer: +2400 items' <<<"$out"; then ok "collect fills a memmap buffer with 2400 items"
else nok "collect into memmap (exit $rc)" "$out"; fi
out=$("$crl" replay check "$mm" 2>&1); rc=$?
if [ "$rc" -eq 0 ] && grep -qx 'items: 2400' <<<"$out" && grep -qx 'capacity: 3000 slots' <<<"$out" \
    && grep -qx 'bad slots: 0' <<<"$out" && grep -qx 'status: clean' <<<"$out"
then ok "check of a clean storage: 2400 items, exit 0"
else nok "check of a clean storage (exit $rc)" "$out"; fi

# ---- one flipped byte in slot 1234 of a data file
row=$(( $(stat -c %s "$mm/leaf-002.bin") / 3000 ))
at=$(( 1234 * row + row - 1 ))
flip "$mm/leaf-002.bin" "$at"
before=$(sums "$mm")
out=$(collect "$mm" 2>&1); rc=$?
if [ "$rc" -eq 1 ] && grep -qF "$mm: slot 1234 is damaged: $mm/leaf-002.bin: byte $at (key '" <<<"$out" \
    && grep -qF "crl replay check $mm" <<<"$out" && ! grep -q '^  replay buffer' <<<"$out"
then ok "collect on a storage with a flipped byte: exit 1 naming the dir, slot 1234, the file and the byte"
else nok "collect on a damaged storage (exit $rc, wanted 1)" "$out"; fi
out=$("$crl" replay check "$mm" 2>&1); rc=$?
if [ "$rc" -eq 1 ] && grep -qF "  slot 1234: $mm/leaf-002.bin: byte $at (key '" <<<"$out" \
    && grep -qx 'items: 2399' <<<"$out" && grep -qx 'bad slots: 1' <<<"$out" && grep -qx 'status: damaged' <<<"$out" \
    && grep -qF "'crl replay repair $mm' empties the bad slots" <<<"$out"
then ok "check lists slot 1234 with its file and byte, 2399 items, exit 1"
else nok "check of a damaged storage (exit $rc, wanted 1)" "$out"; fi
if [ "$(sums "$mm")" = "$before" ]; then ok "neither collect nor check changed a file"
else nok "the storage's files changed without a repair"; fi
data_before=$(sums "$mm" | grep -v slots.bin)
out=$("$crl" replay repair "$mm" 2>&1); rc=$?
if [ "$rc" -eq 0 ] && grep -qF "  slot 1234: $mm/leaf-002.bin" <<<"$out" && grep -qx 'items: 2399' <<<"$out" \
    && grep -qF 'dropped: 1 bad slot (its record in slots.bin emptied; no data file was removed or changed)' <<<"$out" \
    && grep -qx 'status: repaired' <<<"$out"
then ok "repair drops the bad slot and says so: dropped 1, 2399 items, exit 0"
else nok "repair (exit $rc, wanted 0)" "$out"; fi
if [ "$(sums "$mm" | grep -v slots.bin)" = "$data_before" ] && [ "$(ls "$mm" | wc -l)" -eq "$(( $(grep -c . <<<"$data_before") + 2 ))" ]
then ok "repair left every data file as it was"
else nok "repair changed or removed a data file" "$(ls -l "$mm")"; fi
out=$("$crl" replay check "$mm" 2>&1); rc=$?
if [ "$rc" -eq 0 ] && grep -qx 'items: 2399' <<<"$out" && grep -qx 'status: clean' <<<"$out"
then ok "check after the repair: clean, 2399 items"
else nok "check after repair (exit $rc)" "$out"; fi
out=$("$crl" replay repair "$mm" 2>&1); rc=$?
if [ "$rc" -eq 0 ] && grep -qF 'dropped: 0 bad slots' <<<"$out" && grep -qx 'status: clean' <<<"$out"
then ok "repair of a clean storage drops nothing"
else nok "second repair (exit $rc)" "$out"; fi

# ---- the header missing
mv "$mm/header" "$tmp/header.moved"
before=$(sums "$mm")
out=$(collect "$mm" 2>&1); rc=$?
if [ "$rc" -eq 1 ] && grep -qF "$mm/header is missing but $mm/slots.bin holds 2399 committed items (the first in slot 0)" <<<"$out" \
    && ! grep -q '^  replay buffer' <<<"$out"
then ok "collect without the header: exit 1 naming the header, slots.bin and the first slot"
else nok "collect without a header (exit $rc, wanted 1)" "$out"; fi
out=$("$crl" replay check "$mm" 2>&1); rc=$?
if [ "$rc" -eq 1 ] && grep -qF "  $mm/header: missing, and slots.bin holds 2399 committed items" <<<"$out" \
    && grep -qx 'bad files: 1' <<<"$out" && grep -qx 'status: damaged' <<<"$out"
then ok "check without the header: reported as a bad file, exit 1"
else nok "check without a header (exit $rc, wanted 1)" "$out"; fi
out=$("$crl" replay repair "$mm" 2>&1); rc=$?
if [ "$rc" -eq 1 ] && grep -qF "refusing to repair $mm: its header is missing, and it cannot be rebuilt" <<<"$out" \
    && grep -qF 'nothing was changed' <<<"$out" && ! grep -q '^dropped' <<<"$out"
then ok "repair refuses to guess a missing header: exit 1"
else nok "repair without a header (exit $rc, wanted 1)" "$out"; fi
if [ "$(sums "$mm")" = "$before" ] && [ ! -e "$mm/header" ]; then ok "nothing changed without the header"
else nok "files changed while the header was missing"; fi
# The header of another storage made with the same settings is the same file.
collect "$tmp/other" >/dev/null 2>&1
if cmp -s "$tmp/other/header" "$tmp/header.moved"; then ok "a storage made with the same settings has the same header"
else nok "the headers of two storages with the same settings differ"; fi
cp "$tmp/other/header" "$mm/header"
out=$("$crl" replay check "$mm" 2>&1); rc=$?
if [ "$rc" -eq 0 ] && grep -qx 'items: 2399' <<<"$out"; then ok "with a copied header: clean, 2399 items"
else nok "check with a copied header (exit $rc)" "$out"; fi
out=$(collect "$mm" 2>&1); rc=$?
if [ "$rc" -eq 0 ]; then ok "collect resumes the restored storage"
else nok "collect on the restored storage (exit $rc)" "$out"; fi

# ---- never under a writer (flock holds the storage's lock as an open storage does)
out=$(flock -x "$mm/lock" "$crl" replay check "$mm" 2>&1); rc=$?
if [ "$rc" -eq 1 ] && grep -qF "$mm is open in another process" <<<"$out"; then ok "check refuses a storage in use: exit 1"
else nok "check under a lock (exit $rc, wanted 1)" "$out"; fi

# ---- usage
expect() {
    local want=$1 pat=$2 what=$3; shift 4
    local out rc
    out=$("$crl" "$@" 2>&1); rc=$?
    if [ "$rc" -eq "$want" ] && grep -qE -- "$pat" <<<"$out"; then ok "$what"
    else nok "$what (exit $rc, wanted $want; pattern '$pat')" "$out"; fi
}
mkdir "$tmp/empty"
expect 0 'crl replay check DIR' "crl replay --help" -- replay --help
expect 0 'replay +check a durable replay storage' "crl --help lists replay" -- --help
expect 2 'Usage: crl replay' "crl replay without an action is a usage error" -- replay
expect 2 "unknown action 'chek'; did you mean 'check'" "an unknown action gets a hint" -- replay chek "$mm"
expect 2 'no DIR given' "check without DIR" -- replay check
expect 2 'one DIR only' "check with two DIRs" -- replay check "$mm" "$tmp/other"
expect 2 "$tmp/nowhere does not exist" "check of a missing dir: exit 2" -- replay check "$tmp/nowhere"
expect 2 'holds no memmap storage' "check of an empty dir: exit 2" -- replay repair "$tmp/empty"
if [ ! -e "$tmp/empty/lock" ]; then ok "nothing was created in a dir that holds no storage"
else nok "a lock file was created in an empty dir"; fi
expect 2 "storage 'list' \\(plugin replay\\) has no check" "--storage list: nothing on disk to check" \
    -- replay check "$mm" --storage list
expect 2 "no storage 'memap'; did you mean 'memmap'" "--storage with a typo gets a hint" -- replay check "$mm" --storage memap

echo "1..$n"
[ "$failures" -eq 0 ]
