#!/usr/bin/env bash
# The manual pages the build made with `crl help --man` (doc/doc.am): crl(1) documents every command with
# its options, crl.ini(5) every section and key crl accepts (the host's, every component's a selector can
# name, every plugin's own), crl-plugins(7) the search path, scanner and ABI; none names the source tree,
# and groff formats them without a warning.
set -uo pipefail
crl=${CRL:?}
top_build=$(cd "${CRL_TEST_BUILDDIR:?}/.." && pwd)
top_src=$(cd "${CRL_TEST_SRCDIR:?}/.." && pwd)
doc=$top_build/doc
n=0; failures=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
nok() { n=$((n + 1)); failures=$((failures + 1)); echo "not ok $n - $1"; shift; printf '%s\n' "$@" | sed 's/^/# /'; }
# The pages document the plugins of this build, not the test fixtures on the suites' plugin path.
CRL_PLUGIN_PATH=$(tr ':' '\n' <<<"${CRL_PLUGIN_PATH:-}" | grep -v '/tests/' | paste -sd:)
export CRL_PLUGIN_PATH
tmp=$(mktemp -d "${TMPDIR:-/tmp}/crl-man.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

for p in crl.1 crl.ini.5 crl-plugins.7; do
    [ -s "$doc/$p" ] && ok "doc/$p was made" || nok "doc/$p is missing or empty (make all makes it)"
done
# roff's \- as -, without the break points (\:) after slashes, so the pages can be grepped as text.
for p in crl.1 crl.ini.5 crl-plugins.7; do sed 's/\\://g; s/\\-/-/g; s/\\e/\\/g' "$doc/$p" > "$tmp/$p" 2>/dev/null; done

# crl(1): a subsection per command, holding each long option its --help lists.
missing=""
for c in $("$crl" help --complete commands); do
    [ "$c" = help ] && continue
    if ! grep -qx ".SS \"crl $c\"" "$tmp/crl.1"; then missing+=" $c"; continue; fi
    body=$(awk -v h=".SS \"crl $c\"" '$0 == h { on = 1; next } /^\.S[SH] / { on = 0 } on' "$tmp/crl.1")
    for o in $("$crl" help --complete options "$c"); do
        grep -qF -- "$o" <<<"$body" || missing+=" $c:$o"
    done
done
[ -z "$missing" ] && ok "crl(1) documents every command and each of its options" \
    || nok "crl(1) lacks commands or options:$missing"
# ... and the page follows the command table: a command added to main.c appears without editing the page.
ncmd=$("$crl" help --complete commands | grep -vcx help)
nss=$(awk '/^\.SH COMMANDS/ { on = 1; next } /^\.SH / { on = 0 } on && /^\.SS / { k++ } END { print k + 0 }' "$tmp/crl.1")
[ "$ncmd" -eq "$nss" ] && ok "crl(1) has one subsection per command ($ncmd)" \
    || nok "crl(1) has $nss command subsections for $ncmd commands"

# crl.ini(5): "section key" pairs as the page gives them (.SS "[section]" or "[section] sel = name", then
# .TP / .B key), against every key crl accepts (crl help --complete keys) and every section and key
# `crl config show` prints with defaults.
awk '/^\.SS "\[/ { s = $0; sub(/^\.SS "\[/, "", s); sub(/\].*/, "", s); next }
     /^\.SH / { s = "" }
     prev == ".TP" && /^\.B / && s != "" { k = $0; sub(/^\.B /, "", k); sub(/NAME$/, "", k); print s "." k }
     { prev = $0 }' "$tmp/crl.ini.5" | sort -u > "$tmp/documented"
"$crl" help --complete keys | sort -u > "$tmp/keys"
[ -s "$tmp/keys" ] && ok "crl accepts $(wc -l < "$tmp/keys") keys" || nok "crl help --complete keys printed nothing"
undoc=$(comm -23 "$tmp/keys" "$tmp/documented")
[ -z "$undoc" ] && ok "crl.ini(5) documents every key crl accepts with the plugins of this build" \
    || nok "keys crl accepts that crl.ini(5) does not document (built without these plugins' options?)" "$undoc"
# The pattern section [transform.NAME] and its selector.
grep -qx 'transform.NAME.type' "$tmp/documented" && ok "crl.ini(5) documents [transform.NAME] type" \
    || nok "crl.ini(5) has no [transform.NAME] type" "$(grep transform "$tmp/documented" | head)"
if out=$("$crl" config show plugins.autoload=false 2>&1); then
    shown=$(awk '/^\[/ { s = $0; gsub(/[][]/, "", s); next } /^[a-z_.]+ *=/ && s != "" { k = $1; print s "." k }' <<<"$out" | sort -u)
    notdoc=$(comm -23 <(printf '%s\n' "$shown") "$tmp/documented")
    [ -n "$shown" ] && [ -z "$notdoc" ] && ok "every section and key of crl config show is in crl.ini(5) ($(wc -l <<<"$shown") keys)" \
        || nok "crl config show keys missing from crl.ini(5)" "$notdoc"
else nok "crl config show failed" "$out"; fi

# Every key carries a one-line description: in crl.ini(5) the line after an option's "(type, ...)" line
# (or after "Any key starting with ..." for a prefix) is its text, never the next entry or section.
nodesc=$(awk '/^\.SH SECTIONS/ { on = 1 } !on { next }
     /^\.SS "\[/ { s = $0; sub(/^\.SS "\[/, "", s); sub(/\].*/, "", s) }
     prev == ".TP" && /^\.B / { k = $0; sub(/^\.B /, "", k); want = 2; next }
     want == 2 { want = 1; prev = $0; next }
     want == 1 && /^Any key starting with/ { next }
     want == 1 { if ($0 ~ /^\./ || $0 ~ /^ *$/) print s "." k; want = 0 }
     { prev = $0 }' "$tmp/crl.ini.5")
nopt=$(grep -c '^\.TP' "$tmp/crl.ini.5")
[ -z "$nodesc" ] && [ "$nopt" -gt 100 ] && ok "crl.ini(5): each of its $nopt entries has a description" \
    || nok "keys without a description (give each option table entry its one-line doc)" "$nodesc"
# crl config show --describe: the description above every key line, for the host's sections and the
# components the examples choose.
for ex in cartpole-dqn cartpole-ppo pendulum-sac pendulum-workers; do
    if out=$("$crl" config show --describe "$top_src/conf/examples/$ex.ini" 2>&1); then
        miss=$(awk '/^\[/ { s = $0; next } /^(; )?[a-z_0-9.]+ = / { if (prev !~ /^;; ./) print s " " $0 } { prev = $0 }' <<<"$out")
        keys=$(grep -cE '^(; )?[a-z_0-9.]+ = ' <<<"$out")
        [ -z "$miss" ] && [ "$keys" -gt 50 ] && ok "crl config show --describe $ex.ini: a description above each of its $keys keys" \
            || nok "crl config show --describe $ex.ini: keys without a description" "$miss"
    else nok "crl config show --describe $ex.ini failed" "$out"; fi
done

# crl-plugins(7): search path, scanner, registry cache, ABI, the SDK's guide.
for w in CRL_PLUGIN_PATH crl-plugin-scanner scan_timeout registry- "crl-abi-" "GUIDE.md" "pkg-config --variable=abi_depends crl-plugin-sdk"; do
    grep -qF -- "$w" "$tmp/crl-plugins.7" || nok "crl-plugins(7) does not mention '$w'"
done
ok "crl-plugins(7) covers search path, scanner, registry cache, ABI and the guide"

# Installed paths, never the build's or the source tree's.
# The installation prefix may itself lie in the build tree (make distcheck installs into the unpacked
# tarball's _inst): the pages name it, so it is taken out before looking for the trees.
prefix=${CRL_TEST_PREFIX:-}
for p in crl.1 crl.ini.5 crl-plugins.7; do
    text=$(<"$tmp/$p")
    [ -n "$prefix" ] && [ "$prefix" != / ] && text=${text//"$prefix"/PREFIX}
    printf '%s\n' "$text" > "$tmp/tree.$p"
done
if bad=$(grep -lF -e "$top_src" -e "$top_build" "$tmp"/tree.crl.1 "$tmp"/tree.crl.ini.5 "$tmp"/tree.crl-plugins.7); then
    nok "man pages name the source or build tree" "$bad" "$(grep -nF -e "$top_src" -e "$top_build" $bad | head -5)"
else ok "the pages name installed paths only"; fi

# groff: no warnings (lintian's check), when man-db is there.
if command -v man >/dev/null 2>&1; then
    warn=""
    for p in crl.1 crl.ini.5 crl-plugins.7; do
        w=$(LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings -E UTF-8 -l -Tutf8 -Z "$doc/$p" 2>&1 >/dev/null)
        [ -z "$w" ] || warn+="$p: $w"$'\n'
    done
    [ -z "$warn" ] && ok "groff formats the pages without a warning" || nok "groff warnings" "$warn"
else
    echo "# man not installed: groff warnings not checked"
fi
# crl help --man refuses an unknown page.
out=$("$crl" help --man crl.conf 2>&1); rc=$?
[ $rc -eq 2 ] && grep -q "no manual page 'crl.conf'" <<<"$out" && ok "unknown page: exit 2 naming it" \
    || nok "crl help --man crl.conf (exit $rc)" "$out"
echo "1..$n"
[ $failures -eq 0 ]
