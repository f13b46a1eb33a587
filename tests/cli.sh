#!/usr/bin/env bash
# Shell tests of the `crl` command: exit codes (0 ok, 1 runtime, 2 usage or
# config), help texts, the bad-INI table, plugin listing.
set -uo pipefail
crl=${CRL:?}
srcdir=${CRL_TEST_SRCDIR:?}
n=0; failures=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
nok() { n=$((n + 1)); failures=$((failures + 1)); echo "not ok $n - $1"; shift; printf '%s\n' "$@" | sed 's/^/# /'; }
# expect RC PATTERN DESCRIPTION -- ARGS...: run crl, check status and that
# the combined output matches an extended regex.
expect() {
    local want=$1 pat=$2 what=$3; shift 4
    local out rc
    out=$("$crl" "$@" 2>&1); rc=$?
    if [ "$rc" -eq "$want" ] && grep -qE -- "$pat" <<<"$out"; then ok "$what"
    else nok "$what (exit $rc, wanted $want; pattern '$pat')" "$out"; fi
}

expect 0 '^crl [0-9]+\.[0-9]+\.[0-9]+ \(libcrl .*plugin ABI 1\.2\)' "crl version" -- version
expect 0 'Usage: crl COMMAND' "crl --help" -- --help
expect 2 'Usage: crl COMMAND' "crl without a command is a usage error" --
expect 2 "unknown command 'plugns'.*did you mean 'plugins'" "unknown command gets a hint" -- plugns
expect 2 "unexpected argument" "crl version rejects arguments" -- version extra
expect 0 'Usage: crl config' "crl config --help" -- config --help
expect 0 'Usage: crl plugins' "crl plugins --help" -- plugins --help
expect 0 'Usage: crl bench' "crl bench --help" -- bench --help
expect 2 "no benchmark 'cor'.*did you mean 'core'" "unknown benchmark gets a hint" -- bench cor
expect 2 "seconds" "bench rejects a bad --seconds" -- bench core --seconds abc
expect 0 'raw sgemm, same products .* steps/s' "crl bench nn prints MLP steps/s next to raw sgemm" -- bench nn --seconds 0.02
# The conv stack and the LSTM; built with oneDNN, its rows, and its results are crl's (the same computation).
out=$("$crl" bench nn --seconds 0.01 2>&1); rc=$?
grep -qE '^    crl: im2col .* [0-9.]+ ms +[0-9.]+ ms' <<<"$out" && grep -qE '^    crl \(gates .* us' <<<"$out" && [ "$rc" -eq 0 ] \
    && ok "crl bench nn times the Nature-DQN stack and an LSTM step" || nok "crl bench nn: conv or LSTM rows (exit $rc)" "$out"
if grep -q '^  against oneDNN' <<<"$out"; then
    grep -qE '^    oneDNN primitives, its layouts .* [0-9.]+x +[0-9.]+x$' <<<"$out" && grep -qE '^    oneDNN lstm_forward' <<<"$out" \
        && ok "crl bench nn puts oneDNN's primitives next to crl" || nok "crl bench nn: no oneDNN rows" "$out"
    # max |crl - oneDNN| on the outputs and parameter gradients of the conv stack and the LSTM, far below their scale
    agree=$(grep 'same computation' <<<"$out" | grep -oE '[0-9.]+e[-+][0-9]+ on [a-z ]+ up to [0-9.e+-]+' |
        awk '{ if ($1 > 1e-4 * ($NF + 1e-3)) bad++; n++ } END { print n + 0, bad + 0 }')
    [ "$agree" = "4 0" ] && ok "oneDNN's outputs and gradients match crl's on the same weights" \
        || nok "oneDNN and crl disagree (checked, off: $agree)" "$out"
fi
if "$crl" bench --help | grep -q '^  python '; then
    expect 0 '^  processes +[0-9]+ +[0-9]+ +[0-9.]+x +[0-9]+ ms' "crl bench python prints a Python env's steps/s per executor and start-up" \
        -- bench python --seconds 0.02
    expect 0 'crl adds [-+][0-9.]+ ns per step' "crl bench gym runs its loops (and the executors' table)" -- bench gym --seconds 0.01
fi

good=$srcdir/../conf/examples/plugins-check.ini
expect 0 'plugins-check.ini: ok' "config check on the shipped example" -- config check "$good"
expect 0 'level = debug +; command line' "config show reports an override's origin" -- config show "$good" log.level=debug
expect 0 'autoload = true +; .*plugins-check.ini:[0-9]+' "config show reports a file's origin" -- config show "$good"
expect 2 "log.level|level" "an override with a bad enum value is refused" -- config check "$good" log.level=loud
expect 2 "cannot read config file '/nonexistent/x.ini': No such file" "a missing config file is a usage error" -- config check /nonexistent/x.ini

# Typed values of a plugin's own section, checked through the good fixture's
# declared options (the bad-INI files below only know the host's sections).
expect 2 "\\[plugin.good\\] count = '10k': expected a 64-bit integer" "a non-integer plugin option is refused" \
    -- config check "$good" plugins.load=good plugin.good.count=10k
expect 2 "\\[plugin.good\\] count = '500': must be between 1 and 100" "an out-of-range plugin option is refused" \
    -- config check "$good" plugins.load=good plugin.good.count=500
expect 2 "\\[plugin.good\\] buffer = '64X': expected a size in bytes" "a malformed size is refused" \
    -- config check "$good" plugins.load=good plugin.good.buffer=64X
expect 2 "\\[plugin.good\\] buffer = '2G': must be between" "an oversized size is refused" \
    -- config check "$good" plugins.load=good plugin.good.buffer=2G
expect 0 "plugins-check.ini: ok" "a good plugin option passes" -- config check "$good" plugins.load=good plugin.good.buffer=64M

# The bad-config table: every file exits 2 from crl config check, crl run, crl run --dry-run,
# crl inspect and crl collect with the same first error line, which names FILE:LINE and holds the
# message; crl run creates no run directory and prints no progress (no env was stepped).
expected=$srcdir/config/bad/EXPECTED
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
if [ -f "$expected" ]; then
    while read -r kind file line msg; do
        case "$kind" in ''|'#'*) continue ;; esac
        path=$srcdir/config/bad/$file
        rundir=$tmp/run-$file
        first='' why=''
        for cmd in "config check" "run" "run --dry-run" "inspect" "collect"; do
            name=${cmd%% *}
            # shellcheck disable=SC2086  # $cmd is the subcommand and its option, split on purpose
            "$crl" $cmd "$path" "train.run_dir=$rundir" >"$tmp/out" 2>"$tmp/err"; rc=$?
            err=$(head -n 1 "$tmp/err"); err=${err#"crl $name: "}
            if [ "$rc" -ne 2 ]; then why="$why; crl $cmd exits $rc"
            elif ! grep -qF -- "$path:$line: " <<<"$err" || ! grep -qF -- "$msg" <<<"$err"; then
                why="$why; crl $cmd says '$err'"
            elif [ -z "$first" ]; then first=$err
            elif [ "$err" != "$first" ]; then why="$why; crl $cmd says '$err', not '$first'"
            fi
            if [ "$name" = run ] && { [ -e "$rundir" ] || grep -qE '^(run directory|frames) ' "$tmp/out"; }; then
                why="$why; crl $cmd started the run"
            fi
        done
        if [ -z "$why" ]; then ok "bad config $file ($kind): exit 2 at line $line from config check, run, inspect, collect"
        else nok "bad config $file ($kind), wanted exit 2 and '$path:$line: ... $msg'$why" "$(cat "$tmp/err")"; fi
    done <"$expected"
else
    nok "bad-config table $expected is missing"
fi

# Plugin listing over the test fixtures' directory (which holds broken ones
# too): failures are reported and the exit status is 1.
out=$("$crl" plugins --json plugins.load=good 2>/dev/null); rc=$?
if [ "$rc" -eq 0 ] && python3 -c 'import json,sys; d=json.load(sys.stdin); assert any(p["name"]=="good" for p in d["plugins"]), d' <<<"$out"; then
    ok "crl plugins --json is valid JSON listing the good fixture"
else
    nok "crl plugins --json (exit $rc)" "$out"
fi
broken=${CRL_TEST_BUILDDIR:?}/plugins/broken/.libs
expect 0 "abi_major_next.*built for plugin ABI 2" "crl plugins lists a broken plugin named in load with the reason" \
    -- plugins "plugins.path=$broken" plugins.load=good,abi_major_next
expect 1 "1 plugin is broken" "crl plugins --check exits 1 for it" \
    -- plugins --check "plugins.path=$broken" plugins.load=good,abi_major_next
expect 1 "abi_major_next.*built for plugin ABI 2" "a command whose config loads it by name fails with the reason" \
    -- rollout env.backend=classic env.id=CartPole-v1 --steps 1 "plugins.path=$broken" plugins.load=good,abi_major_next
expect 0 "^good " "crl plugins lists the good fixture" -- plugins
expect 0 "good" "plugins --verbose lists the good fixture" -- plugins --verbose plugins.load=good

echo "1..$n"
[ "$failures" -eq 0 ]
