#!/usr/bin/env bash
# libcrl's exports against core/libcrl.map (its linker version script) and the public headers: every
# CRL_API function is exported, nothing else is, each with the version of the map node that lists it, and
# no node is newer than the plugin ABI (CRL_ABI_MAJOR.CRL_ABI_MINOR in plugin.h), or the loader would
# refuse plugins built against this very libcrl.
set -uo pipefail
top_src=$(cd "${CRL_TEST_SRCDIR:?}/.." && pwd)
top_build=$(cd "${CRL_TEST_BUILDDIR:?}/.." && pwd)
map=$top_src/core/libcrl.map
lib=$top_build/core/.libs/libcrl.so.0
n=0; failures=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
nok() { n=$((n + 1)); failures=$((failures + 1)); echo "not ok $n - $1"; shift; printf '%s\n' "$@" | sed 's/^/# /'; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

if [ ! -f "$lib" ]; then
    echo "1..0 # SKIP no shared libcrl ($lib)"
    exit 77
fi

# The map as "symbol version" lines (comments stripped; a node is "NAME {" ... "} [PARENT];").
sed -e 's|/\*.*\*/||g' -e '\|/\*|,\|\*/|d' "$map" | awk '
    /^[ \t]*CRL_[0-9]+\.[0-9]+[ \t]*\{/ { node = $1; sub(/\{.*/, "", node); gsub(/[ \t]/, "", node); next }
    /^[ \t]*\}/ { node = ""; scope = ""; next }
    /global:/ { scope = "global"; next }
    /local:/ { scope = "local"; next }
    node != "" && scope == "global" && /[a-z_0-9]+;/ { s = $1; sub(/;.*/, "", s); print s, node }
' | sort > "$tmp/map"
# What the library exports, as "symbol version".
nm -D --defined-only "$lib" | awk '$2 != "A" { s = $NF; v = s; sub(/@.*/, "", s); if (v ~ /@/) sub(/^[^@]*@@?/, "", v); else v = "(none)"; print s, v }' \
    | sort > "$tmp/exported"
# What the headers declare CRL_API.
grep -h 'CRL_API' "$top_src"/core/include/crl/*.h "$top_src"/plugin-sdk/include/crl/*.h \
    | grep -v '#define' | grep -oE '\bcrl_[a-z][a-z0-9_]*[[:space:]]*\(' | tr -d '( \t' | sort -u > "$tmp/declared"

[ -s "$tmp/map" ] && ok "core/libcrl.map lists $(wc -l < "$tmp/map") symbols" || nok "no symbols read from $map"
dups=$(cut -d' ' -f1 "$tmp/map" | uniq -d)
[ -z "$dups" ] && ok "each symbol in one node" || nok "symbols listed twice in core/libcrl.map" "$dups"

if diff -u "$tmp/map" "$tmp/exported" > "$tmp/diff"; then
    ok "libcrl exports exactly the map's symbols, each at its node's version"
else
    nok "libcrl's exports differ from core/libcrl.map (- map, + nm -D)" "$(cat "$tmp/diff")"
fi
if missing=$(comm -23 "$tmp/declared" <(cut -d' ' -f1 "$tmp/exported")) && [ -z "$missing" ]; then
    ok "every CRL_API function is exported"
else
    nok "CRL_API functions not exported: list each in core/libcrl.map, in the node of the ABI minor that adds it" \
        "$missing"
fi
extra=$(comm -13 "$tmp/declared" <(cut -d' ' -f1 "$tmp/exported"))
[ -z "$extra" ] && ok "nothing exported that no header declares CRL_API" \
    || nok "exported but declared CRL_API in no public header" "$extra"

major=$(sed -n 's/^#define CRL_ABI_MAJOR \([0-9]*\).*/\1/p' "$top_src/plugin-sdk/include/crl/plugin.h")
minor=$(sed -n 's/^#define CRL_ABI_MINOR \([0-9]*\).*/\1/p' "$top_src/plugin-sdk/include/crl/plugin.h")
bad=$(cut -d' ' -f2 "$tmp/map" | sort -u | awk -F'[_.]' -v M="$major" -v m="$minor" '$2 != M || $3 > m')
[ -n "$major" ] && [ -n "$minor" ] && [ -z "$bad" ] && ok "no version node newer than ABI $major.$minor" \
    || nok "version nodes that are not CRL_$major.<minor <= $minor> (bump CRL_ABI_MINOR with a new node)" "$bad"

echo "1..$n"
[ $failures -eq 0 ]
