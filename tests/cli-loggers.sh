#!/usr/bin/env bash
# Shell tests of crl run's loggers ([train] loggers = csv, jsonl, tensorboard): metrics.jsonl holds
# metrics.csv's rows, the TensorBoard event file decodes against crl's tfevent.proto with python3-protobuf
# (framing CRCs, file_version, scalars equal to metrics.csv), --resume rewinds metrics.jsonl and starts a
# new event file, and bad logger names.
set -uo pipefail
crl=${CRL:?}
srcdir=${CRL_TEST_SRCDIR:?}
n=0; failures=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
nok() { n=$((n + 1)); failures=$((failures + 1)); echo "not ok $n - $1"; shift; printf '%s\n' "$@" | sed 's/^/# /'; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
# python3-protobuf is Debian's: the first python3 that imports it
py=
for p in python3 /usr/bin/python3; do
    if command -v "$p" >/dev/null && "$p" -c 'import google.protobuf' 2>/dev/null; then py=$p; break; fi
done

cat > "$tmp/x.ini" <<'INI'
[plugins]
load = classic, losses, transforms
[env]
backend = classic
id = CartPole-v1
num_envs = 4
seed = 0
transforms = sc
[transform.sc]
type = RewardScaling
loc = 0.5
scale = 0.25
[collector]
frames_per_batch = 256
total_frames = 2048
[loss]
type = ppo
num_cells = 16
[train]
epochs = 1
eval_interval = 512
eval_episodes = 2
checkpoint_interval = 1024
INI

out=$("$crl" run "$tmp/x.ini" train.run_dir="$tmp/run" train.loggers=csv,jsonl,tensorboard --quiet 2>&1); rc=$?
tb_unsupported=false
if [ "$rc" -eq 2 ] && grep -q "built without protobuf-c" <<<"$out"; then
    tb_unsupported=true
    ok "a crl without protobuf-c refuses loggers = tensorboard before any work, saying what to install"
    out=$("$crl" run "$tmp/x.ini" train.run_dir="$tmp/run" train.loggers=csv,jsonl --quiet 2>&1); rc=$?
fi
[ "$rc" -eq 0 ] && ok "crl run with loggers = csv, jsonl, tensorboard" || nok "crl run (exit $rc)" "$out"

# metrics.jsonl: metrics.csv's rows, value for value (null for an empty cell)
cmp_jsonl() {
    "${py:-python3}" - "$1/metrics.csv" "$1/metrics.jsonl" <<'PY'
import csv, json, math, sys
rows = list(csv.DictReader(open(sys.argv[1])))
objs = [json.loads(l) for l in open(sys.argv[2])]
assert len(rows) == len(objs) > 3, (len(rows), len(objs))
for r, o in zip(rows, objs):
    assert list(o) == list(r), (list(o), list(r))
    for k, v in r.items():
        if v == "":
            assert o[k] is None, (k, o[k])
        else:
            assert math.isclose(float(v), o[k], rel_tol=1e-5, abs_tol=0.051 if k in ("fps", "seconds") else 1e-9), (k, v, o[k])
PY
}
if err=$(cmp_jsonl "$tmp/run" 2>&1); then ok "metrics.jsonl holds metrics.csv's rows and values"
else nok "metrics.jsonl against metrics.csv" "$err"; fi

if ! $tb_unsupported; then
    ev=$(ls "$tmp/run"/events.out.tfevents.* 2>/dev/null)
    if [ -z "$py" ]; then
        nok "python3-protobuf is needed to decode the event file (apt-get install python3-protobuf)"
    elif [ "$(wc -l <<<"$ev")" -eq 1 ] && [ -s "$ev" ] && mkdir -p "$tmp/pb" \
        && res=$("$py" "$srcdir/tb_decode.py" "$ev" "$srcdir/../core/cli" "$tmp/run/metrics.csv" "$tmp/pb" 2>&1)
    then ok "the TensorBoard event file decodes: framing CRCs, file_version, scalars equal to metrics.csv ($res)"
    else nok "TensorBoard event file" "$ev" "${res:-}"; fi
    # a damaged byte is caught by the decoder (the check can fail)
    if [ -n "$py" ] && [ -n "$ev" ]; then
        cp "$ev" "$tmp/bad.tfevents"
        printf '\x55' | dd of="$tmp/bad.tfevents" bs=1 seek=40 conv=notrunc 2>/dev/null
        if res=$("$py" "$srcdir/tb_decode.py" "$tmp/bad.tfevents" "$srcdir/../core/cli" "$tmp/run/metrics.csv" "$tmp/pb" 2>&1)
        then nok "a damaged event file passed the decoder" "$res"
        else ok "a damaged event file fails the CRC check ($res)"; fi
    fi
fi

# --resume from the checkpoint at 1024 frames after a run killed past it: metrics.jsonl loses the rows
# after the checkpoint, then goes on; a second event file starts.
"$crl" run "$tmp/x.ini" train.run_dir="$tmp/half" collector.total_frames=1024 --quiet \
    train.loggers=jsonl$($tb_unsupported || echo ,tensorboard) >/dev/null 2>&1
printf '{"frames":1280,"seconds":1}\n' >> "$tmp/half/metrics.jsonl"
out=$("$crl" run --resume "$tmp/half" collector.total_frames=2048 --quiet 2>&1); rc=$?
nev=$(ls "$tmp/half"/events.out.tfevents.* 2>/dev/null | wc -l)
if [ "$rc" -eq 0 ] && err=$(cmp_jsonl "$tmp/half" 2>&1) && { $tb_unsupported || [ "$nev" -eq 2 ]; }
then ok "--resume rewinds metrics.jsonl to the checkpoint and appends; a new event file"
else nok "--resume with loggers (exit $rc, $nev event files)" "$out" "${err:-}"; fi

out=$("$crl" run "$tmp/x.ini" train.run_dir="$tmp/bad" train.loggers=csv,xml 2>&1); rc=$?
if [ "$rc" -eq 2 ] && grep -q "'xml' is no logger; choose among csv, jsonl, tensorboard" <<<"$out" && [ ! -e "$tmp/bad" ]
then ok "an unknown logger: exit 2 before any work"
else nok "unknown logger (exit $rc)" "$out"; fi

echo "1..$n"
[ "$failures" -eq 0 ]
