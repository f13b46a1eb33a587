#!/usr/bin/env bash
# The plugin SDK boundary: plugins (plugins/*, the fixtures in tests/plugins) see plugin-sdk/include and
# system or external headers, never a host header (core/include/crl/config.h, core/*-private.h, ...).
#   1. every plugin target of the build has its own CPPFLAGS without a core include dir, so an
#      #include <crl/host.h> fails to compile (the compiler check below proves it does);
#   2. every #include of every plugin source resolves within the plugin's tree, plugin-sdk/include,
#      the build's config.h or outside the project: a failure names FILE:LINE and the host header;
#   3. the compiler's own dependency lists (.deps) of the plugin objects name no host header.
# The checker is first run on a small tree of its own with known violations, so a checker that
# stopped finding them fails too.
set -uo pipefail
src=$(cd "${CRL_TEST_SRCDIR:?}/.." && pwd -P)
build=$(cd "${CRL_TEST_BUILDDIR:?}/.." && pwd -P)
n=0; failures=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
nok() { n=$((n + 1)); failures=$((failures + 1)); echo "not ok $n - $1"; shift; printf '%s\n' "$@" | sed 's/^/# /'; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Within SRC (and its build tree BUILD), may FILE include what it includes?  Prints one
# "FILE:LINE: ..." line per violation; exit status 1 when there was one.
#   "x.h"  first beside FILE (in the source or the build tree: generated headers), and then must stay
#          inside the plugins' trees or the SDK; else searched like <x.h>.  "config.h" is the build's
#          configure header (PACKAGE_VERSION...), which is no host API.
#   <x.h>  found in plugin-sdk/include: the SDK.  Found in core/include, core/, tests/ or at the top
#          of the tree (say <core/env-private.h>): a host header.  Found in another plugin's directory
#          (gym's "pyembed.h"): plugin code.  Anywhere else: a system or external header.
check_includes() {
    local S=$1 B=$2 file=$3 bad=0 line lineno=0 kind name dir rel hit real
    dir=$(dirname "$file")
    rel=${dir#"$S"/}
    while IFS= read -r line || [ -n "$line" ]; do
        lineno=$((lineno + 1))
        [[ $line =~ ^[[:space:]]*#[[:space:]]*include[[:space:]]*(.*)$ ]] || continue
        local what=${BASH_REMATCH[1]}
        if [[ $what =~ ^\"([^\"]+)\" ]]; then kind=quote; name=${BASH_REMATCH[1]}
        elif [[ $what =~ ^\<([^\>]+)\> ]]; then kind=angle; name=${BASH_REMATCH[1]}
        else
            echo "${file#"$S"/}:$lineno: computed #include $what: write the header's name, so the SDK boundary can be checked"
            bad=1; continue
        fi
        hit=""
        if [ $kind = quote ]; then
            if [ "$name" = config.h ] && [ ! -e "$dir/config.h" ]; then continue; fi
            for hit in "$dir/$name" "$B/$rel/$name" ""; do [ -n "$hit" ] && [ -e "$hit" ] && break; done
        fi
        if [ -n "$hit" ]; then
            real=$(realpath -m "$hit")
            case $real in
                "$S"/plugins/*|"$S"/tests/plugins/*|"$S"/plugin-sdk/include/*) ;;
                "$B"/plugins/*|"$B"/tests/plugins/*) ;;
                *) echo "${file#"$S"/}:$lineno: #include \"$name\" reaches ${real#"$S"/}, outside the plugin and the SDK: plugins include plugin-sdk/include/crl/*.h only"
                   bad=1 ;;
            esac
            continue
        fi
        [ -e "$S/plugin-sdk/include/$name" ] && continue
        for hit in "$S/core/include/$name" "$S/core/$name" "$S/tests/$name" "$S/$name" "$B/core/$name" ""; do
            [ -n "$hit" ] && [ -e "$hit" ] && break
        done
        if [ -n "$hit" ]; then
            echo "${file#"$S"/}:$lineno: #include $what is the host header ${hit#"$S"/}, not part of the plugin SDK: use what plugin-sdk/include/crl declares (move what plugins need there)"
            bad=1; continue
        fi
        # Another plugin's header (on that plugin's -I) or a system/external one.
    done < "$file"
    return $bad
}

# 0. The checker on a tree with known violations.
t=$(realpath "$tmp")/tree
mkdir -p "$t/core/include/crl" "$t/plugin-sdk/include/crl" "$t/plugins/p" "$t/build/plugins/p"
: > "$t/core/include/crl/host.h"; : > "$t/core/env-private.h"; : > "$t/plugin-sdk/include/crl/crl.h"
: > "$t/plugins/p/p.h"; : > "$t/build/plugins/p/gen.h"
printf '%s\n' '#include "config.h"' '#include "p.h"' '#include "gen.h"' '#include <crl/crl.h>' '#include <stdio.h>' \
    '#include <glib.h>' '  #  include <crl/host.h>' '#include "../../core/env-private.h"' '#include <core/env-private.h>' \
    '#include "env-private.h"' '#include HEADER' > "$t/plugins/p/bad.c"
out=$(check_includes "$t" "$t/build" "$t/plugins/p/bad.c"); rc=$?
want='plugins/p/bad.c:7: #include <crl/host.h> is the host header core/include/crl/host.h,
plugins/p/bad.c:8: #include "../../core/env-private.h" reaches core/env-private.h,
plugins/p/bad.c:9: #include <core/env-private.h> is the host header core/env-private.h,
plugins/p/bad.c:10: #include "env-private.h" is the host header core/env-private.h,
plugins/p/bad.c:11: computed #include HEADER:'
miss=""
while IFS= read -r w; do grep -qF -- "$w" <<<"$out" || miss+="$w"$'\n'; done <<<"$want"
[ $rc -ne 0 ] && [ -z "$miss" ] && [ "$(wc -l <<<"$out")" -eq 5 ] \
    && ok "the checker names FILE:LINE of each host include in a tree of known violations, and nothing else" \
    || nok "the checker missed violations or flagged good includes (rc=$rc)" "missing: $miss" "got: $out"

# 1. The build: each plugin target's own CPPFLAGS, with no core include dir.
unset MAKEFLAGS MFLAGS MAKELEVEL
printf 'print-%%:\n\t@echo $($*)\n' > "$tmp/print.mk"
mkvar() { make -s --no-print-directory -C "$build" -f Makefile -f "$tmp/print.mk" "print-$1" 2>/dev/null; }
libs=$(mkvar plugins_LTLIBRARIES; mkvar noinst_LTLIBRARIES; mkvar check_LTLIBRARIES)
checked=0; bad_targets=""
for lib in $libs; do
    case $lib in
        plugins/*) ;;
        tests/plugins/future/*) continue ;;  # a stand-in libcrl, not a plugin
        tests/plugins/*) ;;
        *) continue ;;
    esac
    canon=$(tr -c 'a-zA-Z0-9_\n' '_' <<<"$lib")
    flags=$(mkvar "${canon}_CPPFLAGS")
    checked=$((checked + 1))
    if [ -z "$flags" ]; then
        bad_targets+="$lib: no ${canon}_CPPFLAGS, so it gets AM_CPPFLAGS (the host's include dirs): set \$(PLUGIN_CPPFLAGS)"$'\n'
    elif grep -qE -- "-I[^ ]*/core(/| |$)" <<<"$flags"; then
        bad_targets+="$lib: ${canon}_CPPFLAGS has a core include dir: $flags"$'\n'
    fi
done
[ "$checked" -gt 0 ] && [ -z "$bad_targets" ] \
    && ok "the $checked plugin and fixture targets compile with the SDK include dir and no core one" \
    || nok "plugin targets that can see host headers ($checked checked)" "${bad_targets%$'\n'}"

cc=$(mkvar CC)
pflags=$(mkvar PLUGIN_CPPFLAGS)
printf '#include <crl/crl.h>\nint probe(void);\nint probe(void) { return CRL_OK; }\n' > "$tmp/sdk.c"
printf '#include <crl/host.h>\nint probe(void);\nint probe(void) { return CRL_OK; }\n' > "$tmp/host.c"
if [ -z "$cc" ]; then
    nok "no CC from $build/Makefile"
else
    (cd "$build" && eval "$cc $pflags -fsyntax-only $tmp/sdk.c") >"$tmp/sdk.log" 2>&1 \
        && ok "<crl/crl.h> compiles with PLUGIN_CPPFLAGS ($pflags)" || nok "<crl/crl.h> with PLUGIN_CPPFLAGS" "$(cat "$tmp/sdk.log")"
    if (cd "$build" && eval "$cc $pflags -fsyntax-only $tmp/host.c") >"$tmp/host.log" 2>&1; then
        nok "<crl/host.h> compiles with PLUGIN_CPPFLAGS: the build does not keep host headers from plugins"
    else
        grep -q 'crl/host.h' "$tmp/host.log" && ok "<crl/host.h> does not compile with PLUGIN_CPPFLAGS" \
            || nok "<crl/host.h> with PLUGIN_CPPFLAGS failed for another reason" "$(cat "$tmp/host.log")"
    fi
fi

# 2. Every include of every plugin source.
files=$(cd "$src" && find plugins tests/plugins -name '*.[ch]' ! -name libcrl_future.c | sort)
report=""; count=0
for f in $files; do
    count=$((count + 1))
    r=$(check_includes "$src" "$build" "$src/$f") || report+="$r"$'\n'
done
[ "$count" -gt 50 ] && [ -z "$report" ] \
    && ok "the $count plugin sources include only SDK, plugin, configure and system/external headers" \
    || nok "plugin sources that include host headers ($count checked)" "${report%$'\n'}"

# 3. What the compiler read, from automake's dependency files of the plugin objects.
deps=$(cd "$build" && find plugins tests/plugins -path '*/.deps/*.P[lo]*' ! -name '*libcrl*' 2>/dev/null | sort)
if [ -z "$deps" ]; then
    ok "# SKIP no dependency files (configured with --disable-dependency-tracking?)"
else
    host=""
    for d in $deps; do
        h=$(tr ' \\' '\n\n' < "$build/$d" | grep -E "^($src|$build)/core/|^(\.\./)*core/" | sort -u)
        [ -n "$h" ] && host+="$d read: $(tr '\n' ' ' <<<"$h")"$'\n'
    done
    [ -z "$host" ] && ok "no plugin object's dependency list names a header under core/ ($(wc -w <<<"$deps") files)" \
        || nok "plugin objects compiled with host headers" "${host%$'\n'}"
fi

echo "1..$n"
[ $failures -eq 0 ]
