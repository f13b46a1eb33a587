#!/usr/bin/env bash
# The packaging test (README, "Separate commands"; not in `make check` or CI: it builds everything twice
# and takes 20 to 40 minutes on 2 cores).  As a distribution would, from the release tarball:
#   1. make dist, then the Debian source package (crl_V.orig.tar.gz + debian/) and the binary packages
#      with dpkg-buildpackage, which runs the whole suite (make check) unless --nocheck;
#   2. lintian on the source and binary packages, with --pedantic: any tag fails the test but the
#      initial-upload ones (an upload that closes no ITP bug);
#   3. a clean Debian 12 root made by debootstrap (cached in $CRL_PKG_CACHE), the autopkgtest of
#      debian/tests run there on the built packages (autopkgtest's chroot backend);
#   4. where rpmbuild exists, the RPM from the same tarball with packaging/rpm/crl.spec (without its
#      %check unless --rpm-check: the suite already ran in step 1), and the virtual package it provides.
# Needs root (apt-get, debootstrap, chroot) and the Debian mirror for the clean root; what it installs
# on this machine: debhelper, lintian, devscripts, autopkgtest, debootstrap, rpm, and crl's build deps.
#
#   packaging/test.sh [--nocheck] [--rpm-check] [--no-root] [--no-rpm] [--work DIR]
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
work=${TMPDIR:-/tmp}/crl-packaging
cache=${CRL_PKG_CACHE:-${TMPDIR:-/tmp}/crl-packaging-cache}
mirror=${CRL_PKG_MIRROR:-http://deb.debian.org/debian}
nocheck=0 rpmcheck=0 root=1 rpm=1
while [ $# -gt 0 ]; do
    case $1 in
        --nocheck) nocheck=1 ;;
        --rpm-check) rpmcheck=1 ;;
        --no-root) root=0 ;;
        --no-rpm) rpm=0 ;;
        --work) work=$2; shift ;;
        -h | --help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "packaging/test.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    esac
    shift
done
n=0; failures=0
step() { echo; echo "=== $*"; }
ok() { n=$((n + 1)); echo "ok $n - $1"; }
nok() { n=$((n + 1)); failures=$((failures + 1)); echo "not ok $n - $1"; shift; printf '%s\n' "$@" | sed 's/^/# /'; }
[ "$(id -u)" -eq 0 ] || { echo "packaging/test.sh: needs root (apt-get, debootstrap, chroot)" >&2; exit 2; }

step "tools and build dependencies"
tools=(debhelper lintian devscripts autopkgtest debootstrap dpkg-dev fakeroot man-db)
[ $rpm -eq 1 ] && tools+=(rpm)
# crl's own build dependencies: bootstrap.sh's list (the same as debian/control's Build-Depends).
mapfile -t deps < <(sed -n '/^packages=(/,/^)/p' "$top/bootstrap.sh" | sed '1d;$d' | tr ' ' '\n' | sed '/^$/d')
missing=()
for p in "${tools[@]}" "${deps[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "installing ${missing[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

rm -rf "$work"
mkdir -p "$work"
step "release tarball (make dist)"
mkdir -p "$work/dist-build"
[ -x "$top/configure" ] || (cd "$top" && autoreconf -fi)
(cd "$work/dist-build" && "$top/configure" -q && make -s dist) > "$work/dist.log" 2>&1 \
    || { tail -30 "$work/dist.log"; echo "make dist failed" >&2; exit 1; }
tarball=$(ls "$work"/dist-build/crl-*.tar.gz)
version=$(basename "$tarball" .tar.gz); version=${version#crl-}
ok "make dist: $(basename "$tarball")"

step "Debian source and binary packages"
deb=$work/deb
mkdir -p "$deb"
cp "$tarball" "$deb/crl_$version.orig.tar.gz"
tar -C "$deb" -xzf "$tarball"
src=$deb/crl-$version
cp -r "$src/packaging/debian" "$src/debian"
[ $nocheck -eq 1 ] && export DEB_BUILD_OPTIONS="nocheck${DEB_BUILD_OPTIONS:+ $DEB_BUILD_OPTIONS}"
if (cd "$src" && dpkg-buildpackage -us -uc -j2) > "$work/dpkg-buildpackage.log" 2>&1; then
    ok "dpkg-buildpackage -us -uc$([ $nocheck -eq 1 ] && echo ' (nocheck)' || echo ', the suite passing in its test step')"
else
    tail -60 "$work/dpkg-buildpackage.log"
    nok "dpkg-buildpackage failed (log: $work/dpkg-buildpackage.log)"
    echo "1..$n"; exit 1
fi
grep -E '^(# )?(PASS|FAIL|ERROR|XFAIL|SKIP|TOTAL):' "$work/dpkg-buildpackage.log" | tail -8 || true
changes=$(ls "$deb"/crl_"$version"-*_*.changes)
debs=$(ls "$deb"/*.deb)
for p in libcrl0 libcrl-dev crl crl-plugin-gym crl-plugin-dm-control; do
    ls "$deb/${p}_"*.deb >/dev/null 2>&1 || nok "no $p package built"
done
ok "packages: $(cd "$deb" && ls ./*.deb | sed 's|^\./||' | tr '\n' ' ')"
provides=$(dpkg-deb -f "$deb"/libcrl0_*.deb Provides)
major=$(sed -n 's/^#define CRL_ABI_MAJOR \([0-9]*\).*/\1/p' "$src/plugin-sdk/include/crl/plugin.h")
minor=$(sed -n 's/^#define CRL_ABI_MINOR \([0-9]*\).*/\1/p' "$src/plugin-sdk/include/crl/plugin.h")
[ "$provides" = "crl-abi-$major (= $major.$minor)" ] && ok "libcrl0 Provides: $provides" \
    || nok "libcrl0 Provides '$provides', not 'crl-abi-$major (= $major.$minor)'"
dpkg-deb -c "$deb"/libcrl0_*.deb > /dev/null
ctrl=$(dpkg-deb --ctrl-tarfile "$deb"/libcrl0_*.deb | tar -tf -)
grep -q symbols <<<"$ctrl" && ok "libcrl0 carries its symbols file" \
    || nok "libcrl0 has no symbols control file"
# (listings in variables: grep -q closing a pipe early would fail it under pipefail)
list=$(dpkg-deb -c "$deb"/crl_*.deb)
for f in usr/share/man/man1/crl.1.gz usr/share/man/man5/crl.ini.5.gz usr/share/man/man7/crl-plugins.7.gz \
         usr/share/bash-completion/completions/crl usr/share/crl/examples/cartpole-dqn.ini; do
    grep -q " \./$f$" <<<"$list" || nok "crl does not ship /$f"
done
list=$(dpkg-deb -c "$deb"/libcrl-dev_*.deb)
for f in usr/share/doc/libcrl-dev/GUIDE.md usr/share/doc/libcrl-dev/examples/walk.c; do
    grep -q " \./$f$" <<<"$list" || nok "libcrl-dev does not ship /$f"
done
ok "crl ships man pages, completion and examples; libcrl-dev the guide and example"

step "lintian --pedantic"
# An initial upload closes no ITP bug here: those tags aside, nothing may be reported.
allowed='initial-upload-closes-no-bugs|new-package-should-close-itp-bug'
lintian -I -E --pedantic --tag-display-limit 0 "$changes" > "$work/lintian.txt" 2>&1 || true
cat "$work/lintian.txt"
if bad=$(grep -E '^[EWIPX]: ' "$work/lintian.txt" | grep -vE ": ($allowed)( |$)"); then
    nok "lintian reports tags" "$bad"
else ok "lintian --pedantic: no tags but the initial-upload ones"; fi

if [ $root -eq 1 ]; then
    step "autopkgtest in a clean Debian 12 root"
    chroot=$cache/bookworm
    if [ ! -x "$chroot/bin/sh" ]; then
        mkdir -p "$cache"
        if ! debootstrap --variant=minbase bookworm "$chroot.new" "$mirror" > "$work/debootstrap.log" 2>&1; then
            tail -5 "$work/debootstrap.log"
            nok "debootstrap bookworm from $mirror failed (no network to the mirror? log: $work/debootstrap.log)"
            rm -rf "$chroot.new"
            root=0
        else
            mv "$chroot.new" "$chroot"
        fi
    fi
fi
if [ $root -eq 1 ]; then
    # A throwaway copy, so the cache stays clean between runs.
    troot=$work/root
    cp -a "$chroot" "$troot"
    cp /etc/resolv.conf "$troot/etc/resolv.conf" 2>/dev/null || true
    printf 'deb %s bookworm main\n' "$mirror" > "$troot/etc/apt/sources.list"
    mounts=()
    cleanup() { for m in "${mounts[@]}"; do umount -l "$m" 2>/dev/null || true; done; }
    trap cleanup EXIT
    for m in proc sys dev dev/pts; do
        mount --bind "/$m" "$troot/$m" && mounts=("$troot/$m" "${mounts[@]}")
    done
    chroot "$troot" apt-get update -qq > "$work/root-apt.log" 2>&1 || true
    if autopkgtest --no-built-binaries -o "$work/autopkgtest" $debs "$deb/crl_$version"-*.dsc -- chroot "$troot" \
        > "$work/autopkgtest.log" 2>&1; then
        ok "autopkgtest (sdk-example, cli) passes in a clean Debian 12 root"
    else
        tail -40 "$work/autopkgtest.log"
        nok "autopkgtest failed (log: $work/autopkgtest.log)"
    fi
    grep -E '^(sdk-example|cli) ' "$work/autopkgtest.log" || true
    cleanup
    trap - EXIT
fi

if [ $rpm -eq 1 ] && command -v rpmbuild >/dev/null 2>&1; then
    step "RPM (rpmbuild)"
    rpmtop=$work/rpm
    mkdir -p "$rpmtop/SOURCES"
    cp "$tarball" "$rpmtop/SOURCES/"
    tar -xzf "$tarball" -C "$rpmtop" "crl-$version/packaging/rpm/crl.spec"
    # Debian has no RPM database of the build dependencies: --nodeps (they are installed as .debs above).
    rpmopts=(--nodeps --define "_topdir $rpmtop" -bb)
    [ $rpmcheck -eq 1 ] || rpmopts+=(--without check)
    if rpmbuild "${rpmopts[@]}" "$rpmtop/crl-$version/packaging/rpm/crl.spec" > "$work/rpmbuild.log" 2>&1; then
        ok "rpmbuild -bb crl.spec$([ $rpmcheck -eq 1 ] && echo ' with %check' || echo ' (without %check)')"
        rpms=$(find "$rpmtop/RPMS" -name '*.rpm' | sort)
        echo "$rpms" | sed 's|.*/|  |'
        prov=$(rpm -qp --provides $(grep -- '-libs-' <<<"$rpms") 2>/dev/null | grep '^crl-abi' || true)
        [ "$prov" = "crl-abi-$major = $major.$minor" ] && ok "crl-libs provides $prov" \
            || nok "crl-libs provides '$prov', not 'crl-abi-$major = $major.$minor'"
        for r in crl-devel crl-plugin-gym crl-plugin-dm-control; do
            grep -q "/$r-$version" <<<"$rpms" || nok "no $r package"
        done
        files=$(rpm -qpl $(grep -- '/crl-devel-' <<<"$rpms"))
        grep -q '/GUIDE.md$' <<<"$files" && ok "crl-devel ships the guide" \
            || nok "crl-devel lacks GUIDE.md"
    else
        tail -40 "$work/rpmbuild.log"
        nok "rpmbuild failed (log: $work/rpmbuild.log)"
    fi
elif [ $rpm -eq 1 ]; then
    echo "# rpmbuild not installed: RPM not built"
fi
echo "1..$n"
echo "packaging: $((n - failures)) passed, $failures failed (work dir: $work)"
[ $failures -eq 0 ]
