#!/usr/bin/env bash
# Installs crl into a temporary DESTDIR, builds the SDK's example plugin out
# of tree there through pkg-config, and shows `crl plugins` loading it.  The
# SDK's headers install apart from the host's (include/crl-sdk-1 and
# include/crl-1): with crl-plugin-sdk's cflags no host header compiles and
# the example's compile reads crl headers from the SDK's tree alone; crl.pc
# gives a program embedding libcrl both.
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
inc=$dest$prefix/include
sdkinc=$inc/crl-sdk-1
hostinc=$inc/crl-1
[ -f "$pcdir/crl.pc" ] && ok "crl.pc installed" || fail "crl.pc not in $pcdir"
for h in "$src"/plugin-sdk/include/crl/*.h; do
    [ -f "$sdkinc/crl/${h##*/}" ] || fail "SDK header crl/${h##*/} not installed in $sdkinc/crl"
done
ok "SDK headers installed in include/crl-sdk-1/crl ($(ls "$sdkinc/crl" | wc -l))"
hosth=$(cd "$src/core/include" && ls crl/*.h)
for h in $hosth; do
    [ -f "$hostinc/$h" ] || fail "host header $h not installed in $hostinc"
    [ ! -e "$sdkinc/$h" ] || fail "host header $h installed among the SDK's ($sdkinc)"
done
[ ! -e "$inc/crl" ] && ok "host headers in include/crl-1/crl, none among the SDK's, nothing in include/crl" \
    || fail "headers installed in $inc/crl, on every compiler's default path" "$(ls "$inc/crl")"
# SDK headers need nothing but the C standard headers named in DESIGN.md.
if bad=$(grep -H '#include <' "$sdkinc"/crl/*.h | grep -v -E '<(stddef|stdint|stdbool)\.h>|<crl/' ); then
    fail "SDK headers include more than stddef/stdint/stdbool" "$bad"
else ok "SDK headers are self-contained"; fi
plugdir=$dest$libdir/crl/plugins
if ls "$plugdir"/*.la >/dev/null 2>&1; then fail "libtool .la files installed beside the plugins" "$(ls "$plugdir")"
else ok "plugins installed without .la files"; fi

cp -r "$src/plugin-sdk/example" "$tmp/example"
export PKG_CONFIG_PATH=$pcdir PKG_CONFIG_SYSROOT_DIR=$dest
cflags=$(pkg-config --cflags crl-plugin-sdk | sed "s/ *$//")
[ "$cflags" = "-I$sdkinc" ] && ok "crl-plugin-sdk's cflags name the SDK's tree only ($cflags)" \
    || fail "crl-plugin-sdk's cflags are '$cflags', not -I$sdkinc"
# A plugin built with the SDK's flags cannot reach a host header...
cc=${CC:-cc}
for h in $hosth; do
    printf '#include <%s>\n' "$h" > "$tmp/probe.c"
    if "$cc" $cflags -fsyntax-only "$tmp/probe.c" >"$tmp/probe.log" 2>&1; then
        fail "#include <$h> compiles with crl-plugin-sdk's cflags ($cflags): plugins can see host headers"
    fi
    grep -q "$h" "$tmp/probe.log" || fail "#include <$h> failed for another reason than a missing header" "$(cat "$tmp/probe.log")"
done
ok "no host header (${hosth//$'\n'/ }) is reachable with crl-plugin-sdk's cflags"
if out=$(make -C "$tmp/example" 2>&1); then ok "example builds out of tree via pkg-config"; else fail "example build" "$out"; fi
# ... and what the example's compile read: crl headers from the SDK's tree alone.
if ! deps=$("$cc" $cflags -M "$tmp/example/hello.c" 2>&1); then fail "$cc -M hello.c" "$deps"; fi
crlh=$(tr ' \\' '\n\n' <<<"$deps" | grep '/crl/' | sort -u)
[ -n "$crlh" ] && ! grep -qv "^$sdkinc/crl/" <<<"$crlh" \
    && ok "the example's compile read $(wc -l <<<"$crlh") crl headers, all from include/crl-sdk-1" \
    || fail "the example's compile read crl headers from elsewhere than $sdkinc" "$crlh"
# A program embedding libcrl gets both trees from crl.pc.
printf '#include <crl/trainer.h>\n#include <crl/plugin.h>\n#include <stdio.h>\nint main(void) { puts(crl_version()); return 0; }\n' \
    > "$tmp/app.c"
# A sanitized libcrl (configure --enable-sanitizers) needs its runtime first in the program too.
san=$(sed -n 's/^SANITIZER_CFLAGS = //p' "$top_build/Makefile")
if out=$("$cc" $san $(pkg-config --cflags crl) -o "$tmp/app" "$tmp/app.c" $(pkg-config --libs crl) 2>&1) \
    && [ "$(LD_LIBRARY_PATH=$dest$libdir "$tmp/app")" = "$(sed -n 's/^Version: //p' "$pcdir/crl.pc")" ]; then
    ok "a program builds with pkg-config crl (host and SDK headers) and runs"
else fail "program against crl.pc" "$(pkg-config --cflags --libs crl 2>&1)" "$out"; fi
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
