#!/usr/bin/env bash
# Writes packaging/debian/libcrl0.symbols from core/libcrl.map (libcrl's linker version script): one line
# per exported symbol at its version node, plus each node's own symbol, as dpkg-gensymbols writes them.
# A symbol already in the file keeps its minimal version; a new one gets the version in configure.ac's
# AC_INIT (the first upstream release that has it).
#   packaging/update-symbols.sh          rewrite the file
#   packaging/update-symbols.sh --check  exit 1 with a diff when the file is out of date (tests/debian-symbols.sh)
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
map=$top/core/libcrl.map
file=$top/packaging/debian/libcrl0.symbols
version=$(sed -n 's/^AC_INIT(\[crl\], \[\([^]]*\)\].*/\1/p' "$top/configure.ac")
[ -n "$version" ] || { echo "update-symbols.sh: no version in AC_INIT of $top/configure.ac" >&2; exit 2; }

# "symbol node" lines of the map (comments stripped; a node is "NAME {" ... "} [PARENT];").
symbols=$(sed -e 's|/\*.*\*/||g' -e '\|/\*|,\|\*/|d' "$map" | awk '
    /^[ \t]*CRL_[0-9]+\.[0-9]+[ \t]*\{/ { node = $1; sub(/\{.*/, "", node); gsub(/[ \t]/, "", node); print node, node; next }
    /^[ \t]*\}/ { node = ""; scope = ""; next }
    /global:/ { scope = "global"; next }
    /local:/ { scope = "local"; next }
    node != "" && scope == "global" && /[a-z_0-9]+;/ { s = $1; sub(/;.*/, "", s); print s, node }
' | LC_ALL=C sort -u)
[ -n "$symbols" ] || { echo "update-symbols.sh: no symbols read from $map" >&2; exit 2; }

new=$(
    echo "libcrl.so.0 libcrl0 #MINVER#"
    echo "* Build-Depends-Package: libcrl-dev"
    while read -r sym node; do
        old=$( [ -f "$file" ] && awk -v k="$sym@$node" '$1 == k { print $2; exit }' "$file" || true)
        echo " $sym@$node ${old:-$version}"
    done <<<"$symbols"
)
if [ "${1:-}" = --check ]; then
    if ! d=$(diff -u "$file" <(printf '%s\n' "$new")); then
        printf '%s\n' "$d"
        echo "packaging/debian/libcrl0.symbols is out of date with core/libcrl.map: run packaging/update-symbols.sh" >&2
        exit 1
    fi
    exit 0
fi
printf '%s\n' "$new" > "$file"
