#!/usr/bin/env bash
# What the distribution packaging states about the sources, checked against them: the Debian symbols
# file against core/libcrl.map and against what the built libcrl exports, and the version in
# configure.ac against debian/changelog and the RPM spec.  (The packages themselves are built by
# packaging/test.sh, a separate command.)
set -uo pipefail
top_src=$(cd "${CRL_TEST_SRCDIR:?}/.." && pwd)
top_build=$(cd "${CRL_TEST_BUILDDIR:?}/.." && pwd)
n=0; failures=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
nok() { n=$((n + 1)); failures=$((failures + 1)); echo "not ok $n - $1"; shift; printf '%s\n' "$@" | sed 's/^/# /'; }
symbols=$top_src/packaging/debian/libcrl0.symbols

if out=$("$top_src/packaging/update-symbols.sh" --check 2>&1); then
    ok "libcrl0.symbols lists exactly core/libcrl.map's symbols at their nodes"
else
    nok "libcrl0.symbols is out of date: run packaging/update-symbols.sh (new symbols get this release's version)" "$out"
fi
lib=$top_build/core/.libs/libcrl.so.0
if [ -f "$lib" ]; then
    # dpkg-gensymbols' view: name@version of every dynamic symbol libcrl defines.
    exported=$(nm -D --defined-only "$lib" | awk '{ s = $NF; sub(/@@/, "@", s); if ($2 == "A") s = s "@" s; print s }' | LC_ALL=C sort -u)
    listed=$(awk 'NR > 1 && /^ / { print $1 }' "$symbols" | LC_ALL=C sort -u)
    if d=$(diff <(printf '%s\n' "$listed") <(printf '%s\n' "$exported")); then
        ok "the built libcrl exports what libcrl0.symbols lists ($(wc -l <<<"$listed") symbols)"
    else
        nok "libcrl's exports differ from libcrl0.symbols (< file, > library)" "$d"
    fi
else
    echo "# no shared libcrl ($lib): exports not compared"
fi
head -1 "$symbols" | grep -qx 'libcrl.so.0 libcrl0 #MINVER#' && ok "symbols file for libcrl.so.0 in libcrl0" \
    || nok "first line of libcrl0.symbols is not 'libcrl.so.0 libcrl0 #MINVER#'" "$(head -1 "$symbols")"

version=$(sed -n 's/^AC_INIT(\[crl\], \[\([^]]*\)\].*/\1/p' "$top_src/configure.ac")
deb=$(sed -n '1s/^crl (\([^)]*\)).*/\1/p' "$top_src/packaging/debian/changelog")
rpm=$(sed -n 's/^Version: *//p' "$top_src/packaging/rpm/crl.spec")
[ "${deb%-*}" = "$version" ] && ok "debian/changelog's upstream version is configure's ($version)" \
    || nok "debian/changelog is at ${deb:-?}, configure.ac at $version: add a changelog entry (dch -v $version-1)"
[ "$rpm" = "$version" ] && ok "crl.spec's Version is configure's ($version)" \
    || nok "packaging/rpm/crl.spec has Version ${rpm:-?}, configure.ac $version"
# The virtual package follows the headers' ABI: debian/rules derives it from plugin.h, the RPM spec states
# it (and its %build checks it too).
major=$(sed -n 's/^#define CRL_ABI_MAJOR \([0-9]*\).*/\1/p' "$top_src/plugin-sdk/include/crl/plugin.h")
minor=$(sed -n 's/^#define CRL_ABI_MINOR \([0-9]*\).*/\1/p' "$top_src/plugin-sdk/include/crl/plugin.h")
spec_abi=$(sed -n 's/^%global crl_abi_major *//p' "$top_src/packaging/rpm/crl.spec").$(sed -n 's/^%global crl_abi_minor *//p' "$top_src/packaging/rpm/crl.spec")
[ "$spec_abi" = "$major.$minor" ] && ok "crl.spec's crl_abi is plugin.h's ($major.$minor)" \
    || nok "crl.spec has crl_abi $spec_abi, plugin.h $major.$minor: update %global crl_abi_major/minor"
if grep -n 'crl-abi-[0-9]' "$top_src/packaging/debian/control"; then
    nok "debian/control spells a crl-abi-N by hand (debian/rules derives \${crl:Abi} from CRL_ABI_MAJOR $major)"
else ok "debian/control takes crl-abi-$major from debian/rules"; fi
echo "1..$n"
[ $failures -eq 0 ]
