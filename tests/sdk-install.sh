#!/usr/bin/env bash
# Installs crl into a temporary DESTDIR, builds the SDK's example plugin out
# of tree there through pkg-config from its installed copy (beside the
# installed GUIDE.md, which must name only installed files), and uses its env
# backend, transform and storage through the installed crl: plugins, rollout
# (seeding, render), option checks, and a short crl run with --resume.  The
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

# The guide and the example are installed together; the guide names installed files only.
guide=$(find "$dest" -path '*/doc/*/GUIDE.md' -type f)
[ -n "$guide" ] && [ -f "${guide%/GUIDE.md}/examples/Makefile" ] && ok "GUIDE.md and examples/ installed (${guide#$dest})" \
    || fail "GUIDE.md or examples/ not installed" "$(find "$dest" -name GUIDE.md)"
sdkdoc=${guide%/GUIDE.md}
for f in "$src"/plugin-sdk/examples/*; do
    cmp -s "$f" "$sdkdoc/examples/${f##*/}" || fail "examples/${f##*/} not installed as in the sources"
done
refs=$(grep -oE '`examples/[A-Za-z0-9_.-]+`' "$guide" | tr -d '`' | sort -u)
for r in $refs; do [ -f "$sdkdoc/$r" ] || fail "GUIDE.md names $r, which is not installed"; done
if bad=$(grep -nE '(plugins|tests|core|plugin-sdk)/[a-z_]' "$guide"); then
    fail "GUIDE.md names files of the source tree, which no package installs" "$bad"
fi
ok "GUIDE.md names only installed files ($(wc -w <<<"$refs") under examples/)"
examples=$(find "$dest" -path '*/crl/examples/cartpole-dqn.ini' -type f)
[ -n "$examples" ] && ok "conf/examples installed (${examples%/cartpole-dqn.ini})" || fail "conf/examples not installed"

cp -r "$sdkdoc/examples" "$tmp/example"
chmod -R u+w "$tmp/example"
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
if ! deps=$("$cc" $cflags -M "$tmp"/example/*.c 2>&1); then fail "$cc -M example/*.c" "$deps"; fi
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
syms=$(nm -D --defined-only "$tmp/example/example.so" | awk '$2 ~ /^[TDBRV]$/ { print $3 }')
[ "$syms" = crl_plugin_v1 ] && ok "example exports crl_plugin_v1 alone" || fail "example exports: $syms"

crl=$dest$prefix/bin/crl
scanner=$(find "$dest" -name crl-plugin-scanner -type f)
[ -n "$scanner" ] && [ -x "$scanner" ] && ok "the plugin scanner is installed ($scanner)" || fail "no crl-plugin-scanner installed"
# The example and the plugins installed into DESTDIR (where the installed crl would find them).
export LD_LIBRARY_PATH=$dest$libdir CRL_PLUGIN_PATH=$tmp/example:$plugdir CRL_PLUGIN_SCANNER=$scanner
out=$("$crl" plugins 2>&1); rc=$?
[ $rc -eq 0 ] && grep -q '^example 1.0.0' <<<"$out" && grep -q 'env/walk' <<<"$out" \
    && grep -q 'transform/StepPenalty' <<<"$out" && grep -q 'storage/ring' <<<"$out" \
    && ok "installed crl finds the example's env backend, transform and storage" || fail "crl plugins (rc=$rc)" "$out"
# Its own option, from a command-line override, reaches init; a bad value never does.
out=$("$crl" plugins plugins.load=example plugin.example.verbose=true log.level=info 2>&1); rc=$?
[ $rc -eq 0 ] && [ "$(grep -c 'example: registered ' <<<"$out")" -eq 3 ] \
    && ok "plugin option from a command-line override reaches init" || fail "override (rc=$rc)" "$out"
out=$("$crl" plugins plugin.example.verbose=maybe 2>&1); rc=$?
[ $rc -eq 2 ] && grep -q 'verbose' <<<"$out" && ok "a bad plugin option is refused (exit 2)" \
    || fail "bad option accepted (rc=$rc)" "$out"
walk=(env.backend=walk env.id=Walk-v0 env.num_envs=3)
out=$("$crl" envs --backend walk 2>&1); rc=$?
[ $rc -eq 0 ] && [ "$out" = walk/Walk-v0 ] && ok "crl envs lists walk/Walk-v0" || fail "crl envs (rc=$rc)" "$out"
out=$("$crl" inspect "${walk[@]}" 2>&1); rc=$?
[ $rc -eq 0 ] && grep -q 'BoundedTensorSpec' <<<"$out" && grep -q 'DiscreteTensorSpec' <<<"$out" && grep -q 'truncated' <<<"$out" \
    && ok "crl inspect shows the walk specs" || fail "crl inspect (rc=$rc)" "$out"
out=$("$crl" inspect "${walk[@]}" env.size=99 2>&1); rc=$?
[ $rc -eq 2 ] && grep -q 'size' <<<"$out" && ok "an out-of-range backend option is refused naming it" \
    || fail "env.size=99 (rc=$rc)" "$out"
# Seeding: the same seed gives the same rollout, another seed another one; episodes end by termination
# and (with a short limit) by truncation.
r1=$("$crl" rollout "${walk[@]}" --steps 40 --seed 5 --json 2>&1) && r2=$("$crl" rollout "${walk[@]}" --steps 40 --seed 5 --json 2>&1) \
    && r3=$("$crl" rollout "${walk[@]}" --steps 40 --seed 6 --json 2>&1) \
    && [ "$r1" = "$r2" ] && [ "$r1" != "$r3" ] && ok "seeded rollouts repeat, other seeds differ" \
    || fail "rollouts with seeds 5, 5, 6" "$r1" "$r3"
out=$("$crl" rollout "${walk[@]}" env.max_steps=2 env.size=64 --steps 6 --seed 1 --json 2>&1); rc=$?
[ $rc -eq 0 ] && grep -q '"next.truncated".*true' <<<"$out" && ok "the host truncates at max_steps" \
    || fail "truncation (rc=$rc)" "$out"
grep -q '"next.terminated".*true' <<<"$r1" && ok "walkers terminate at the ends" || fail "no termination in 40 steps" "$r1"
if out=$("$crl" rollout "${walk[@]}" --steps 3 --auto-reset --save-frames "$tmp/frames" 2>&1); then
    [ "$(ls "$tmp/frames" | wc -l)" -eq 4 ] && ok "render: 4 frames written" || fail "frames" "$(ls "$tmp/frames")"
elif grep -q 'cairo\|PNG' <<<"$out"; then echo "# crl built without PNG output: frames not checked"
else fail "rollout --save-frames" "$out"; fi
# The transform on its own key, and a short training run with all three, stopped and resumed.
out=$("$crl" rollout "${walk[@]}" env.transforms=p transform.p.type=StepPenalty transform.p.penalty=0.5 \
    transform.p.out_keys=penalized --steps 2 --json 2>&1); rc=$?
[ $rc -eq 0 ] && grep -q '"next.penalized"' <<<"$out" && ok "StepPenalty writes its out_key" || fail "StepPenalty (rc=$rc)" "$out"
out=$(cd "$tmp/example" && "$crl" run walk-dqn.ini collector.total_frames=600 train.run_dir="$tmp/run" --quiet 2>&1); rc=$?
[ $rc -eq 0 ] && [ -s "$tmp/run/metrics.csv" ] && [ -d "$tmp/run/checkpoint" ] \
    && ok "crl run walk-dqn.ini trains with walk, StepPenalty and ring" || fail "crl run (rc=$rc)" "$out"
out=$("$crl" run --resume "$tmp/run" collector.total_frames=800 --quiet 2>&1); rc=$?
[ $rc -eq 0 ] && ok "crl run --resume reloads the ring storage from the checkpoint" || fail "resume (rc=$rc)" "$out"
# Messages name the examples where they are installed (or, uninstalled, the source tree's).
out=$("$crl" config check 2>&1)
ex=$(grep -oE '[^ (]*/plugins-check.ini' <<<"$out")
[ -n "$ex" ] && [ -f "$ex" ] && ok "messages name an existing examples directory (${ex%/plugins-check.ini})" \
    || fail "crl config check names no existing example" "$out"
echo "1..$n"
