#!/usr/bin/env bash
# Installs crl into a temporary DESTDIR, builds the SDK's example plugin out
# of tree there through pkg-config, and shows `crl plugins` loading it.
set -uo pipefail
top_build=$(cd "${CRL_TEST_BUILDDIR:?}/.." && pwd)
src=${CRL_TEST_SRCDIR:?}/..
tmp=$(mktemp -d)
trap 'chmod -R u+w "$tmp"; rm -rf "$tmp"' EXIT
n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
fail() { n=$((n + 1)); echo "not ok $n - $1"; shift; printf '%s\n' "$@" | sed 's/^/# /'; exit 1; }

unset MAKEFLAGS MFLAGS MAKELEVEL
dest=$tmp/root
if out=$(make -C "$top_build" install DESTDIR="$dest" 2>&1); then ok "make install into DESTDIR"; else fail "make install" "$out"; fi
prefix=$(sed -n 's/^prefix=//p' "$top_build/plugin-sdk/crl-plugin-sdk.pc")
libdir=$(PKG_CONFIG_PATH= pkg-config --variable=libdir "$top_build/plugin-sdk/crl-plugin-sdk.pc")
pcdir=$dest$libdir/pkgconfig
[ -f "$pcdir/crl-plugin-sdk.pc" ] && ok "crl-plugin-sdk.pc installed" || fail "crl-plugin-sdk.pc not in $pcdir"
for h in crl.h error.h tensor.h td.h rng.h spec.h options.h plugin.h nn.h distributions.h actor.h value.h; do
    [ -f "$dest$prefix/include/crl/$h" ] || fail "header crl/$h not installed"
done
ok "SDK headers installed"
plugdir=$dest$libdir/crl/plugins
if ls "$plugdir"/*.la >/dev/null 2>&1; then fail "libtool .la files installed beside the plugins" "$(ls "$plugdir")"
else ok "plugins installed without .la files"; fi
# SDK headers need nothing but the C standard headers named in DESIGN.md.
if bad=$(grep -h '#include <' "$dest$prefix"/include/crl/{crl,error,tensor,td,rng,spec,options,plugin,nn,distributions,actor,value}.h \
        | grep -v -E '<(stddef|stdint|stdbool)\.h>|<crl/' ); then
    fail "SDK headers include more than stddef/stdint/stdbool" "$bad"
else ok "SDK headers are self-contained"; fi

cp -r "$src/plugin-sdk/example" "$tmp/example"
export PKG_CONFIG_PATH=$pcdir PKG_CONFIG_SYSROOT_DIR=$dest
if out=$(make -C "$tmp/example" 2>&1); then ok "example builds out of tree via pkg-config"; else fail "example build" "$out"; fi
pluginsdir=$(pkg-config --variable=pluginsdir crl-plugin-sdk)
[ "$pluginsdir" = "$dest$libdir/crl/plugins" ] && ok "pluginsdir variable" || fail "pluginsdir is '$pluginsdir'"
nm -D --defined-only "$tmp/example/hello.so" | grep -q ' crl_plugin_v1$' && ok "example exports crl_plugin_v1" \
    || fail "example does not export crl_plugin_v1"

crl=$dest$prefix/bin/crl
scanner=$(find "$dest" -name crl-plugin-scanner -type f)
[ -n "$scanner" ] && [ -x "$scanner" ] && ok "the plugin scanner is installed ($scanner)" || fail "no crl-plugin-scanner installed"
export LD_LIBRARY_PATH=$dest$libdir CRL_PLUGIN_PATH=$tmp/example CRL_PLUGIN_SCANNER=$scanner
out=$("$crl" plugins 2>&1); rc=$?
[ $rc -eq 0 ] && grep -q 'hello' <<<"$out" && ok "installed crl loads the example plugin" \
    || fail "crl plugins (rc=$rc)" "$out"
# Named in [plugins] load, it is loaded into crl (autoloaded plugins wait until a component is used).
out=$("$crl" plugins --verbose plugins.load=hello plugin.hello.repeat=2 log.level=info 2>&1); rc=$?
[ $rc -eq 0 ] && [ "$(grep -c '\[hello\] hello from an out-of-tree plugin' <<<"$out")" -eq 2 ] \
    && ok "plugin option from a command-line override reaches init" || fail "override (rc=$rc)" "$out"
out=$("$crl" plugins plugin.hello.repeat=11 2>&1); rc=$?
[ $rc -ne 0 ] && grep -q 'repeat' <<<"$out" && ok "out-of-range plugin option is refused" \
    || fail "out-of-range option accepted (rc=$rc)" "$out"
echo "1..$n"
