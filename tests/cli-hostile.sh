#!/usr/bin/env bash
# Hostile plugins never break unrelated work (issue: a plugin host third parties and distributions can
# trust).  For each plugin in the table, alone on the plugin path with a fresh registry cache:
#   - `crl rollout` of the built-in CartPole exits 0 with one warning naming the plugin and the reason;
#   - `crl plugins` lists it as broken with the reason, and `crl plugins --check` exits 1;
#   - a config that loads it by name ([plugins] load) fails, naming it and the reason;
#   - whatever code of it ran, ran in scanner processes, never in the command's own process;
#   - a second run takes the cached result (no new scan) unless the result was a timeout.
# Then hostile Python envs (segfault, os._exit, hang) inline and on the processes executor.
set -uo pipefail
crl=${CRL:?}
builddir=${CRL_TEST_BUILDDIR:?}
n=0; failures=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
nok() { n=$((n + 1)); failures=$((failures + 1)); echo "not ok $n - $1"; shift; printf '%s\n' "$@" | sed 's/^/# /'; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/crl-hostile.XXXXXX") || exit 1
trap 'chmod -R u+w "$tmp" 2>/dev/null; chown -R "$(id -u)" "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT
chmod 0755 "$tmp"
hostile=$builddir/plugins/hostile/.libs
broken=$builddir/plugins/broken/.libs
good=$builddir/plugins/.libs/good.so
cartpole=(env.backend=classic env.id=CartPole-v1 --steps 5)
# Hangs are cut short: this is the only timeout in the table, and only the hang cases wait for it.
quick=plugins.scan_timeout=2

# run DIR CASE ARGS...: crl with DIR alone on the plugin path and CASE's own cache and markers; sets out,
# rc and pid (the command's own pid).
run() {
    local dir=$1 case=$2; shift 2
    mkdir -p "$tmp/$case/markers" "$tmp/$case/cache"
    CRL_PLUGIN_PATH=$dir XDG_CACHE_HOME=$tmp/$case/cache CRL_TEST_MARKER_DIR=$tmp/$case/markers \
        "$crl" "$@" >"$tmp/$case/out" 2>&1 &
    pid=$!
    wait "$pid"; rc=$?
    out=$(cat "$tmp/$case/out")
}

# No marker line of NAME written by the process PID.
ran_in() {
    local name=$1 pidfile=$tmp/$2/markers/$1.pids
    [ -f "$pidfile" ] && grep -q "^$3 " "$pidfile"
}

# check_case NAME SO REASON-REGEX: the four properties above for one plugin file.
check_case() {
    local name=$1 so=$2 reason=$3 case=$1
    local dir=$tmp/$case/plugins
    mkdir -p "$dir"
    cp "$so" "$dir/"
    local start=$SECONDS
    run "$dir" "$case" rollout "${cartpole[@]}" "$quick"
    local took=$((SECONDS - start))
    if [ "$rc" -eq 0 ] && grep -q "next.observation\|observation" <<<"$out" &&
       grep -qE "plugin '$name' is broken and was not loaded: .*$reason" <<<"$out" &&
       [ "$(grep -c "plugin '$name' is broken" <<<"$out")" -eq 1 ]; then
        ok "$name: crl rollout of CartPole exits 0 with one warning naming it (${took}s)"
    else
        nok "$name: crl rollout (exit $rc, ${took}s; wanted 0 and one warning matching '$reason')" "$out"
    fi
    if ran_in "$name" "$case" "$pid"; then
        nok "$name: its code ran in the command's process ($pid)" "$(cat "$tmp/$case/markers/$name.pids")"
    else
        ok "$name: none of its code ran in the command's process"
    fi

    run "$dir" "$case" plugins "$quick"
    if [ "$rc" -eq 0 ] && grep -q "^broken" <<<"$out" && grep -qE "$reason" <<<"$out" &&
       grep -q "$dir/$name.so" <<<"$out"; then
        ok "$name: crl plugins lists it as broken with the reason"
    else
        nok "$name: crl plugins (exit $rc)" "$out"
    fi
    run "$dir" "$case" plugins --check "$quick"
    if [ "$rc" -eq 1 ] && grep -q "1 plugin is broken" <<<"$out"; then ok "$name: crl plugins --check exits 1"
    else nok "$name: crl plugins --check (exit $rc, wanted 1)" "$out"; fi

    run "$dir" "$case" rollout "${cartpole[@]}" "$quick" "plugins.load=$name"
    if [ "$rc" -ne 0 ] && grep -qE "$reason" <<<"$out" && grep -q "$name" <<<"$out"; then
        ok "$name: a config that loads it by name fails with the reason (exit $rc)"
    else
        nok "$name: plugins.load=$name (exit $rc, wanted non-zero and '$reason')" "$out"
    fi
    if ran_in "$name" "$case" "$pid"; then
        nok "$name: its code ran in the process that loaded it by name" "$(cat "$tmp/$case/markers/$name.pids")"
    else
        ok "$name: loading it by name ran none of its code in the command's process"
    fi
}

for where in ctor entry init fini; do
    case $where in
        ctor) stage='while being loaded' ;;
        entry) stage='in its entry point' ;;
        init) stage='during init' ;;
        fini) stage='during fini' ;;
    esac
    check_case "${where}_segv" "$hostile/${where}_segv.so" "crashed with SIGSEGV $stage"
    check_case "${where}_abort" "$hostile/${where}_abort.so" "crashed with SIGABRT $stage"
    check_case "${where}_exit" "$hostile/${where}_exit.so" "exit status 0 $stage.* without reporting back"
    check_case "${where}_hang" "$hostile/${where}_hang.so" "did not finish scanning within 2 s: it hung $stage"
done
check_case missing_op "$hostile/missing_op.so" "has no 'step' op"
check_case bad_default "$hostile/bad_default.so" "option 'level' has default \"big\""
check_case shadow_seed "$hostile/shadow_seed.so" "declares option 'seed', which is the host's own key in \[env\]"
check_case abi_major_next "$broken/abi_major_next.so" "built for plugin ABI 2\."
check_case abi_minor_next "$broken/abi_minor_next.so" "needs plugin ABI 1\.[0-9]+, newer than"
check_case undefined_sym "$broken/undefined_sym.so" "undefined symbol"
check_case init_fail "$broken/init_fail.so" "init failed"

check_case wrong_name "$broken/wrong_name.so" "declares plugin name"

# ---- crl config check still checks with a plugin that exits or crashes on the path ----
printf '[env]\nbackend = classic\nid = CartPole-v1\ngravityy = 9.8\n' >"$tmp/typo.ini"
printf '[env]\nbackend = classic\nid = CartPole-v1\n' >"$tmp/fine.ini"
for name in init_exit ctor_segv; do
    run "$tmp/$name/plugins" "$name" config check "$tmp/typo.ini" "$quick"
    if [ "$rc" -eq 2 ] && grep -q "typo.ini:4" <<<"$out" && grep -q "gravityy" <<<"$out"; then
        ok "$name on the path: crl config check still finds the typo (exit 2, FILE:LINE)"
    else
        nok "$name: crl config check of a typo (exit $rc, wanted 2)" "$out"
    fi
    run "$tmp/$name/plugins" "$name" config check "$tmp/fine.ini" "$quick"
    if [ "$rc" -eq 0 ] && grep -q "plugin '$name' is broken" <<<"$out"; then
        ok "$name on the path: crl config check of a good file exits 0 with the warning"
    else
        nok "$name: crl config check of a good file (exit $rc, wanted 0)" "$out"
    fi
done

# ---- path security: another user's or a world-writable component is refused before anything runs ----
# sec_case CASE LAYOUT-FUNCTION REASON: the layout function builds $tmp/CASE/plugins/good.so.
sec_case() {
    local case=$1 reason=$3
    mkdir -p "$tmp/$case"
    "$2" "$tmp/$case"
    local dir=$tmp/$case/plugins
    run "$dir" "$case" rollout "${cartpole[@]}"
    if [ "$rc" -eq 0 ] && grep -qE "plugin 'good' is broken and was not loaded: refusing to load .*$reason" <<<"$out" &&
       [ ! -e "$tmp/$case/markers/good.ran" ]; then
        ok "$case: refused before any of its code ran, the rollout still runs"
    else
        nok "$case (exit $rc; wanted 0 and '$reason')" "$out" "$(ls "$tmp/$case/markers")"
    fi
    run "$dir" "$case" plugins --check
    if [ "$rc" -eq 1 ] && grep -qE "$reason" <<<"$out"; then ok "$case: crl plugins --check names the reason"
    else nok "$case: crl plugins --check (exit $rc)" "$out"; fi
}
middle_link() {   # plugins/good.so -> ww/mid.so -> safe/good.so, ww world-writable
    mkdir -p "$1/safe" "$1/ww" "$1/plugins"; chmod 0777 "$1/ww"
    cp "$good" "$1/safe/good.so"; ln -s "$1/safe/good.so" "$1/ww/mid.so"; ln -s "$1/ww/mid.so" "$1/plugins/good.so"
}
ww_parent() {     # a 0755 plugin dir inside a world-writable, not sticky, parent
    mkdir -p "$1/open/plugins"; chmod 0777 "$1/open"; cp "$good" "$1/open/plugins/good.so"
    ln -s "$1/open/plugins" "$1/plugins"
}
sec_case middle-link middle_link "middle-link/ww .*is world-writable"
sec_case world-writable-parent ww_parent "world-writable-parent/open .*is world-writable"
if [ "$(id -u)" -eq 0 ]; then
    other_owner() { mkdir -p "$1/plugins"; cp "$good" "$1/plugins/good.so"; chown 65534 "$1/plugins/good.so"; }
    other_dir() { mkdir -p "$1/plugins"; cp "$good" "$1/plugins/good.so"; chown 65534 "$1/plugins"; }
    group_dir() { mkdir -p "$1/plugins"; cp "$good" "$1/plugins/good.so"; chgrp 65534 "$1/plugins"; chmod 0775 "$1/plugins"; }
    sec_case other-owner-file other_owner "owned by uid 65534"
    sec_case other-owner-dir other_dir "owned by uid 65534"
    sec_case group-writable-dir group_dir "writable by group 65534"
else
    echo "# skipped: the other-owner and group layouts need root to make (running as uid $(id -u))"
fi

# ---- the cache: a second command does not scan again; a changed file is scanned again ----
mkdir -p "$tmp/cache/plugins"
cp "$hostile/init_segv.so" "$tmp/cache/plugins/"
run "$tmp/cache/plugins" cache plugins
first=$(wc -l <"$tmp/cache/markers/init_segv.pids" 2>/dev/null || echo 0)
run "$tmp/cache/plugins" cache plugins
second=$(wc -l <"$tmp/cache/markers/init_segv.pids" 2>/dev/null || echo 0)
if [ "$first" -ge 1 ] && [ "$second" -eq "$first" ] && grep -q "crashed with SIGSEGV during init" <<<"$out"; then
    ok "a broken plugin is scanned once; the next command takes the cached reason"
else
    nok "cache reuse (markers after first run $first, after second $second)" "$out"
fi
touch -d '2001-01-01' "$tmp/cache/plugins/init_segv.so"
run "$tmp/cache/plugins" cache plugins
third=$(wc -l <"$tmp/cache/markers/init_segv.pids" 2>/dev/null || echo 0)
if [ "$third" -gt "$second" ]; then ok "a changed plugin file (mtime) is scanned again"
else nok "rescan after a change (markers $second then $third)" "$out"; fi
run "$tmp/cache/plugins" cache plugins --rescan
fourth=$(wc -l <"$tmp/cache/markers/init_segv.pids" 2>/dev/null || echo 0)
if [ "$fourth" -gt "$third" ]; then ok "crl plugins --rescan scans again"
else nok "crl plugins --rescan (markers $third then $fourth)" "$out"; fi
# A corrupt cache is said and rebuilt.
for f in "$tmp/cache/cache/crl/"registry-*.bin; do printf 'garbage' >"$f"; done
run "$tmp/cache/plugins" cache plugins
if [ "$rc" -eq 0 ] && grep -qiE "registry.*(corrupt|rebuil)" <<<"$out" && grep -q "crashed with SIGSEGV" <<<"$out"; then
    ok "a corrupt registry cache is reported and rebuilt"
else
    nok "corrupt cache (exit $rc)" "$out"
fi

# ---- a good plugin is deferred: known from its cached scan, loaded only when one of its components is used ----
mkdir -p "$tmp/lazy/plugins"
cp "$good" "$tmp/lazy/plugins/"
run "$tmp/lazy/plugins" lazy plugins                  # scans it (its init runs in the scanner)
rm -f "$tmp/lazy/markers/good.ran"
run "$tmp/lazy/plugins" lazy plugins
if [ "$rc" -eq 0 ] && grep -q "^good 1.2.3" <<<"$out" && grep -q "env/goodenv" <<<"$out" &&
   [ ! -e "$tmp/lazy/markers/good.ran" ]; then
    ok "crl plugins lists a good plugin from its cached scan without running its code"
else
    nok "crl plugins on a good plugin (exit $rc)" "$out"
fi
run "$tmp/lazy/plugins" lazy rollout "${cartpole[@]}"
if [ "$rc" -eq 0 ] && [ ! -e "$tmp/lazy/markers/good.ran" ]; then
    ok "a rollout that uses none of its components does not load it"
else
    nok "lazy loading (exit $rc; good.ran $( [ -e "$tmp/lazy/markers/good.ran" ] && echo exists || echo absent))" "$out"
fi
run "$tmp/lazy/plugins" lazy inspect env.backend=goodenv env.id=Any-v0
if [ "$rc" -ne 0 ] && grep -q "env backend 'goodenv' has no such env; its envs: none" <<<"$out" &&
   [ -e "$tmp/lazy/markers/good.ran" ]; then
    ok "using one of its components loads it (its backend then lists no envs, as the fixture's does)"
else
    nok "load on use (exit $rc)" "$out"
fi

# Hostile Python envs (crl_testenvs.hostile): inline, os._exit is an error of the step, not a silent exit 0;
# on the processes executor a segfault, os._exit or hang is a worker failure naming the env and the worker,
# and on_worker_failure = restart carries the rollout through.
gymdir=$builddir/../plugins/gym/.libs
if [ -f "$gymdir/gym.so" ]; then
    killer=(plugin.gym.python_path="${CRL_TEST_SRCDIR:?}/python" env.backend=gym env.id=killer
            env.entry_point=crl_testenvs.hostile:KillingEnv env.kwargs.at_step=2 env.num_envs=2 --steps 6 --auto-reset)
    # Sanitizer builds: a worker's segfault stays a SIGSEGV.
    export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}handle_segv=0
    run "$gymdir" py-exit-inline rollout "${killer[@]}" env.kwargs.how=exit
    if [ "$rc" -eq 1 ] && grep -q "os._exit(0) was called in the crl process" <<<"$out" &&
       grep -q "executor = processes" <<<"$out"; then
        ok "inline, an env's os._exit(0) fails the rollout with a message (not a silent exit 0)"
    else
        nok "os._exit inline (exit $rc)" "$out"
    fi
    for how in segv exit hang; do
        case $how in
            segv) want="was killed by signal 11 (Segmentation fault)" ;;
            exit) want="exited with status 0" ;;
            hang) want="did not finish within step_timeout = 1 s and was killed" ;;
        esac
        run "$gymdir" py-$how rollout "${killer[@]}" env.kwargs.how=$how env.executor=processes env.num_workers=2 \
            env.step_timeout=1
        if [ "$rc" -eq 1 ] && grep -q "the worker of env [01] of gym/killer $want during step (worker [01] of 2)" <<<"$out"; then
            ok "on processes, a Python env's $how is a worker failure naming the env and the worker"
        else
            nok "$how on processes (exit $rc)" "$out"
        fi
        run "$gymdir" py-$how-restart rollout "${killer[@]}" env.kwargs.how=$how env.executor=processes \
            env.num_workers=2 env.step_timeout=1 env.on_worker_failure=restart env.max_restarts=20
        if [ "$rc" -eq 0 ] && grep -q "steps: *6 (x 2 envs of gym/killer)" <<<"$out"; then
            ok "on_worker_failure = restart carries a rollout through a Python env's $how"
        else
            nok "$how with restarts (exit $rc)" "$out"
        fi
    done
fi

echo "1..$n"
[ "$failures" -eq 0 ]
