#!/usr/bin/env bash
# Shell tests of `crl run --seeds`: the sweep directory's layout, summary.csv and seeds.csv recomputed here
# from each seed's metrics.csv, failing seeds reported with their exit status while the others run, the
# --seeds/--jobs usage errors; and crl run's progress lines off a terminal, paced by a fake clock
# (tests/timewarp-shim.c), never by how fast this machine is.
set -uo pipefail
crl=${CRL:?}
srcdir=${CRL_TEST_SRCDIR:?}
builddir=${CRL_TEST_BUILDDIR:?}
n=0; failures=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
nok() { n=$((n + 1)); failures=$((failures + 1)); echo "not ok $n - $1"; shift; printf '%s\n' "$@" | sed 's/^/# /'; }
ini=$srcdir/../conf/examples/cartpole-dqn.ini
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
# a few hundred frames a seed; stop_return low enough that some seeds reach it at different frame counts
tiny="collector.total_frames=600 collector.init_random_frames=100 train.eval_interval=100 train.eval_episodes=2 train.stop_return=30"

# ---- layout ----
sw=$tmp/sweep
out=$("$crl" run "$ini" $tiny --seeds 0-2 --jobs 2 train.run_dir="$sw" 2>&1); rc=$?
layout=1
for s in 0 1 2; do
    d=$sw/seed-$s
    [ -s "$d/metrics.csv" ] && [ -s "$d/checkpoint/trainer.ckpt" ] && [ -s "$sw/seed-$s.log" ] \
        && grep -qE "^seed = $s +; command line" "$d/config.ini" \
        && [ "$(sed -n '/^\[env\]/,/^\[/p' "$d/config.ini" | grep -cE "^seed = $s +; command line")" = 1 ] \
        && [ "$(sed -n '/^\[replay\]/,/^\[/p' "$d/config.ini" | grep -cE "^seed = $s +; command line")" = 1 ] \
        || layout=0
done
if [ "$rc" -eq 0 ] && [ "$layout" = 1 ] && [ -s "$sw/summary.csv" ] && [ -s "$sw/seeds.csv" ] \
    && [ "$(head -c 8 "$sw/curve.png" | od -An -tx1 | tr -d ' \n')" = "89504e470d0a1a0a" ] \
    && [ "$(grep -c '^seed [0-2]: started (process [0-9]*), run directory' <<<"$out")" = 3 ] \
    && grep -q '^sweep summary' <<<"$out"
then ok "--seeds 0-2 --jobs 2: seed-N run directories (train, env and replay seed N), their logs, summary.csv, seeds.csv, curve.png"
else nok "sweep layout (exit $rc)" "$out" "$(ls -R "$sw" 2>&1)"; fi

# ---- summary.csv recomputed from the seeds' metrics.csv (columns found by name) ----
# per frame count: seeds, mean, population std, min, max and each seed's value (tolerance: %.6g rounding)
expect=$(for s in 0 1 2; do
    awk -F, -v s="$s" 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
                       $c["eval_return"] != "" { print $c["frames"], s, $c["eval_return"] }' "$sw/seed-$s/metrics.csv"
done | sort -n -k1,1 -k2,2 | awk '
    { f = $1; if (!(f in cnt)) order[++nf] = f; cnt[f]++; sum[f] += $3; v[f, $2] = $3
      if (!(f in mn) || $3 < mn[f]) mn[f] = $3; if (!(f in mx) || $3 > mx[f]) mx[f] = $3 }
    END { for (k = 1; k <= nf; k++) { f = order[k]; m = sum[f] / cnt[f]; ss = 0
              for (s = 0; s < 3; s++) if ((f, s) in v) ss += (v[f, s] - m) ^ 2
              line = sprintf("%d %d %.9g %.9g %.9g %.9g", f, cnt[f], m, sqrt(ss / cnt[f]), mn[f], mx[f])
              for (s = 0; s < 3; s++) line = line " " (((f, s) in v) ? v[f, s] : "-")
              print line } }')
got=$(awk -F, 'NR == 1 { print; next } { line = $1 " " $2; for (i = 3; i <= NF; i++) line = line " " ($i == "" ? "-" : $i); print line }' "$sw/summary.csv")
cmp=$(paste -d'|' <(tail -n +2 <<<"$got") <(cat <<<"$expect") | awk -F'|' '
    { split($1, g, " "); split($2, e, " "); n = length(e)
      if (length(g) != n) { bad++; print "columns: " $0; next }
      for (i = 1; i <= n; i++) {
          if (g[i] == "-" || e[i] == "-") { if (g[i] != e[i]) { bad++; print "missing: " $0 } continue }
          d = g[i] - e[i]; if (d < 0) d = -d; t = 1e-5 * (e[i] < 0 ? -e[i] : e[i]) + 1e-9
          if (d > t) { bad++; print "value " i ": " $0 } } }
    END { exit bad > 0 }'); crc=$?
if [ "$crc" -eq 0 ] && [ "$(head -1 "$sw/summary.csv")" = "frames,seeds,mean,std,min,max,seed_0,seed_1,seed_2" ] \
    && [ "$(tail -n +2 "$sw/summary.csv" | wc -l)" = "$(wc -l <<<"$expect")" ] && [ -n "$expect" ]
then ok "summary.csv: per frame count the seeds, mean, std, min, max and each seed's eval return of their metrics.csv"
else nok "summary.csv" "$cmp" "$(cat "$sw/summary.csv")" "expected:" "$expect"; fi

# seeds.csv: frames and seconds of each seed's first evaluation at or above stop_return (30), else empty
expect=$(for s in 0 1 2; do
    awk -F, -v s="$s" 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
        { fr = $c["frames"]; sec = $c["seconds"] }
        $c["eval_return"] != "" { last = $c["eval_return"]; if (best == "" || last + 0 > best + 0) best = last
                                  if (tf == "" && last + 0 >= 30) { tf = fr; ts = sec } }
        END { printf "%s,0,%s,%g,%g,%g,%s,%s\n", s, fr, sec, last, best, tf, (ts == "" ? "" : sprintf("%g", ts)) }' \
        "$sw/seed-$s/metrics.csv"
done)
got=$(tail -n +2 "$sw/seeds.csv" | awk -F, -v OFS=, '{ $4 = sprintf("%g", $4); $5 = sprintf("%g", $5); $6 = sprintf("%g", $6)
      if ($8 != "") $8 = sprintf("%g", $8); print }')
if [ "$got" = "$expect" ] && [ "$(head -1 "$sw/seeds.csv")" = \
     "seed,exit_status,frames,seconds,eval_return,best_eval_return,frames_to_target,seconds_to_target" ] \
    && grep -qE "^  reached 30: [0-3] of 3 seeds" <<<"$out"
then ok "seeds.csv: each seed's exit status, frames, seconds, last and best eval return, frames and seconds to stop_return"
else nok "seeds.csv" "$(cat "$sw/seeds.csv")" "expected:" "$expect" "$out"; fi

# ---- failing seeds: each reported with its exit status, the others still run ----
# faultenv's step fails in crl's own process at an action of 2 or more (exit status 1).  Two random steps
# (actions 0-4 drawn from crl's own random stream, the same on every platform): seed 0 draws two
# actions below 2 and ends well, seeds 1 and 2 do not.
fault="env.backend=faultenv env.id=Fault-v0 collector.frames_per_batch=1 collector.total_frames=2 collector.init_random_frames=2 train.eval_episodes=0"
out=$("$crl" run "$ini" $fault --seeds 1,0,2 train.run_dir="$tmp/fail" 2>&1); rc=$?
if [ "$rc" -eq 1 ] && grep -qE "^crl run: seed 1 failed with exit status 1: .*; its output is in $tmp/fail/seed-1.log" <<<"$out" \
    && grep -qE "^crl run: seed 2 failed with exit status 1" <<<"$out" && grep -q "^seed 0: done, 2 frames" <<<"$out" \
    && [ "$(grep -c ': started (process' <<<"$out")" = 3 ] && [ -s "$tmp/fail/seed-2.log" ] \
    && grep -q '^1,1,' "$tmp/fail/seeds.csv" && grep -q '^0,0,2,' "$tmp/fail/seeds.csv" && grep -q '^2,1,' "$tmp/fail/seeds.csv" \
    && grep -q "^crl run: not every seed's run ended well" <<<"$out"
then ok "--jobs 1, seed 1 failing first: reported with its exit status, seeds 0 and 2 still run; the sweep exits 1"
else nok "failing seeds (exit $rc)" "$out" "$(cat "$tmp/fail/seeds.csv" 2>&1)"; fi

# ---- SIGINT: passed on once to the running seeds, which checkpoint; exit 130 ----
log=$tmp/int.out
"$crl" run "$ini" collector.total_frames=100000000 train.eval_episodes=0 train.log_interval=100 --seeds 0-2 --jobs 2 \
    train.run_dir="$tmp/int" >"$log" 2>&1 &
pid=$!
# wait (with a guard, never a timing) until seeds 0 and 1 are training: their metrics.csv has rows
for _ in $(seq 600); do
    [ "$(cat "$tmp/int/seed-0/metrics.csv" 2>/dev/null | wc -l)" -gt 2 ] \
        && [ "$(cat "$tmp/int/seed-1/metrics.csv" 2>/dev/null | wc -l)" -gt 2 ] && break
    sleep 0.1
done
kill -INT "$pid"; wait "$pid"; rc=$?
out=$(cat "$log")
if [ "$rc" -eq 130 ] && grep -q "^crl run: SIGINT: passing it on to the 2 running seeds" <<<"$out" \
    && [ -s "$tmp/int/seed-0/checkpoint/trainer.ckpt" ] && [ -s "$tmp/int/seed-1/checkpoint/trainer.ckpt" ] \
    && grep -q "^crl run: seed 0 failed with exit status 130" <<<"$out" && [ ! -e "$tmp/int/seed-2" ] \
    && grep -q "continue with: crl run --resume" "$tmp/int/seed-1.log" && [ -s "$tmp/int/seeds.csv" ]
then ok "--seeds 0-2 --jobs 2, SIGINT: the running seeds checkpoint (exit 130), seed 2 never starts, the sweep exits 130"
else nok "SIGINT during a sweep (exit $rc)" "$out" "$(ls -R "$tmp/int" 2>&1)"; fi

# ---- usage errors: exit 2 naming the option, before any run ----
bad() {  # bad WHAT PATTERN ARGS...
    local what=$1 pat=$2; shift 2
    local o r
    o=$(cd "$tmp" && "$crl" run "$ini" "$@" 2>&1); r=$?
    if [ "$r" -eq 2 ] && grep -qE -- "$pat" <<<"$o" && [ ! -d "$tmp/runs" ]; then ok "$what: exit 2 naming it"
    else nok "$what (exit $r)" "$o"; fi
}
bad "--seeds 4-2" "^crl run: --seeds '4-2': the range '4-2' runs backwards" --seeds 4-2
bad "--seeds 0,x" "^crl run: --seeds '0,x': 'x' is not a seed" --seeds 0,x
bad "--seeds 0-2,1" "^crl run: --seeds '0-2,1': seed 1 is given twice" --seeds 0-2,1
bad "--seeds ''" "^crl run: --seeds '': " --seeds ''
bad "--seeds -1" "^crl run: --seeds '-1': " --seeds=-1
bad "--seeds 0-99999" "more than 10000 seeds" --seeds 0-99999
bad "--seeds without a value" "^crl run: --seeds needs a value" --seeds
bad "--jobs 0" "^crl run: --jobs '0': give a number of runs at a time" --seeds 0-1 --jobs 0
bad "--jobs without --seeds" "^crl run: --jobs goes with --seeds" --jobs 2
bad "--seeds with --resume" "^crl run: --seeds starts new runs" --seeds 0-1 --resume "$tmp"
bad "--seeds with a train.seed override" "^crl run: --seeds sets \[train\] seed of each run: drop the override" \
    --seeds 0-1 train.seed=4
bad "--seeds with a bad config" "train.bogus|bogus" --seeds 0-1 train.bogus=1
out=$("$crl" run "$ini" $tiny --seeds 0 train.run_dir="$sw" 2>&1); rc=$?
if [ "$rc" -eq 2 ] && grep -qF "[train] run_dir = $sw exists, and a sweep directory is never reused" <<<"$out"
then ok "an existing sweep directory is refused (exit 2)"
else nok "existing sweep directory (exit $rc)" "$out"; fi

# crl bench train's options (the benchmark itself is long: README, "Separate commands")
for args in "train --seeds 0|--seeds '0': give a number of seeds from 1 to 100" "train --only nope|--only: no example 'nope'" \
            "core --seeds 2|--seeds goes with crl bench train"; do
    o=$("$crl" bench ${args%%|*} 2>&1); r=$?
    if [ "$r" -eq 2 ] && grep -qF -- "${args#*|}" <<<"$o"; then ok "crl bench ${args%%|*}: exit 2 naming the option"
    else nok "crl bench ${args%%|*} (exit $r)" "$o"; fi
done

# ---- progress off a terminal: time-based with log_interval = 0 ----
shim=$builddir/.libs/timewarp-shim.so
if [ -f "$shim" ]; then
    preload=${LD_PRELOAD:+$LD_PRELOAD:}$shim
    asan=${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0
    # 300 batches of 10 frames, evaluations at 1500 and 3000
    p="collector.total_frames=3000 collector.init_random_frames=200 train.eval_interval=1500 train.eval_episodes=2 train.log_interval=0 --overwrite"
    # a clock that stands still: the first batch, the two evaluations (the second is the end), nothing between
    o0=$(LD_PRELOAD=$preload ASAN_OPTIONS=$asan CRL_TIMEWARP_CLOCK_STEP_MS=0 "$crl" run "$ini" $p train.run_dir="$tmp/p" 2>&1); r0=$?
    rows0=$(($(wc -l <"$tmp/p/metrics.csv") - 1))
    # a clock that moves 6 s at every reading: more than the 5 s between lines at every batch
    o6=$(LD_PRELOAD=$preload ASAN_OPTIONS=$asan CRL_TIMEWARP_CLOCK_STEP_MS=6000 "$crl" run "$ini" $p train.run_dir="$tmp/p" 2>&1); r6=$?
    rows6=$(($(wc -l <"$tmp/p/metrics.csv") - 1))
    l0=$(grep -c '^frames ' <<<"$o0"); l6=$(grep -c '^frames ' <<<"$o6")
    if [ "$r0" -eq 0 ] && [ "$r6" -eq 0 ] && [ "$l0" = 3 ] && [ "$l6" = 300 ] && [ "$rows0" = 300 ] && [ "$rows6" = 300 ] \
        && [ "$(grep '^frames ' <<<"$o0" | cut -d' ' -f2 | tr '\n' ' ')" = "10 1500 3000 " ] \
        && grep -qE '^frames 3000 .* eval [0-9.]+$' <<<"$o0"
    then ok "off a terminal, log_interval = 0: a progress line at most every 5 s (clock still: 3 lines; 6 s a reading: 300), metrics.csv a row per batch"
    else nok "progress throttle (exit $r0/$r6, lines $l0/$l6, rows $rows0/$rows6)" "$o0"; fi
else
    echo "ok $((n + 1)) # SKIP no timewarp shim"; n=$((n + 1))
fi

# ---- progress on a terminal (a pty from script(1)): percentage, frames/s, ETA ----
if command -v script >/dev/null 2>&1; then
    cmd="$(printf '%q ' "$crl" run "$ini" collector.total_frames=3000 collector.init_random_frames=200 \
          train.eval_interval=1500 train.eval_episodes=2 train.run_dir="$tmp/tty")"
    out=$(script -qec "$cmd" /dev/null 2>&1 | tr '\r' '\n'); rc=$?
    if [ "$rc" -eq 0 ] && grep -qE '^.*100%  frames 3000/3000  [0-9]+ frames/s  ETA 0:00  episodes [0-9]+  return [0-9.]+  loss [0-9.e+-]+  eval [0-9.]+' <<<"$out" \
        && grep -qE ' 50%  frames 1500/3000  [0-9]+ frames/s  ETA [0-9]+:[0-9]{2} .* eval ' <<<"$out"
    then ok "on a terminal: one line redrawn with percentage, frames/s and ETA; evaluations keep theirs"
    else nok "progress on a terminal (exit $rc)" "$out"; fi
else
    echo "ok $((n + 1)) # SKIP no script(1) for a pty"; n=$((n + 1))
fi

echo "1..$n"
[ "$failures" -eq 0 ]
