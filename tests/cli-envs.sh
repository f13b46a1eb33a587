#!/usr/bin/env bash
# Shell tests of the env commands of `crl`: envs, inspect, rollout (seeds,
# replayed actions, frames) and `crl bench envs`, over the built-in classic
# backend.
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

tmp=$(mktemp -d "${TMPDIR:-/tmp}/crl-envs.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
# The test fixtures on CRL_PLUGIN_PATH are not loaded unless a test asks.
noauto=plugins.autoload=false
pendulum=(env.backend=classic env.id=Pendulum-v1)
cartpole=(env.backend=classic env.id=CartPole-v1)
examples=$srcdir/../conf/examples

# ---- help ------------------------------------------------------------------
expect 0 'Usage: crl envs' "crl envs --help" -- envs --help
expect 0 'Usage: crl inspect' "crl inspect --help" -- inspect --help
expect 0 'Usage: crl rollout' "crl rollout --help" -- rollout --help
expect 0 'envs .*inspect|inspect' "crl --help lists the env commands" -- --help

# ---- crl envs --------------------------------------------------------------
out=$("$crl" envs "$noauto" 2>&1); rc=$?
missing=
for id in CartPole-v1 Pendulum-v1 MountainCar-v0 MountainCarContinuous-v0 Acrobot-v1; do
    grep -qx "classic/$id" <<<"$out" || missing="$missing $id"
done
if [ "$rc" -eq 0 ] && [ -z "$missing" ]; then ok "crl envs lists the five classic envs"
else nok "crl envs (exit $rc, missing:$missing)" "$out"; fi

out=$("$crl" envs --json "$noauto" 2>/dev/null); rc=$?
if [ "$rc" -eq 0 ] && python3 -c '
import json, sys
d = json.load(sys.stdin)
ids = {(e["backend"], e["id"]) for e in d["envs"]}
want = {("classic", i) for i in ["CartPole-v1", "Pendulum-v1", "MountainCar-v0", "MountainCarContinuous-v0", "Acrobot-v1"]}
assert want <= ids, ids
' <<<"$out"; then ok "crl envs --json is valid JSON with the classic envs"
else nok "crl envs --json (exit $rc)" "$out"; fi

# With the fixtures autoloaded (an env backend without ops cannot get here: its scan refuses it, see
# cli-hostile.sh), every backend's ids are listed; good.so's goodenv offers none.
out=$("$crl" envs 2>"$tmp/envs.err"); rc=$?
if [ "$rc" -eq 0 ] && grep -qx "classic/CartPole-v1" <<<"$out" && grep -qx "countenv/Count-v0" <<<"$out" &&
    ! grep -q "goodenv" <<<"$out"; then ok "crl envs with the fixtures lists every backend's ids"
else nok "crl envs with the fixtures (exit $rc, wanted 0)" "$out"; fi
# A registered backend without a fixed id list (as gym) is named as such, not as "no backend registered".
if grep -q "env/goodenv (plugin good) lists no fixed ids; its make accepts or refuses each env.id" "$tmp/envs.err" &&
    ! grep -q "no env backend is registered" "$tmp/envs.err"; then ok "a backend with no id list is named on stderr"
else nok "a backend with no id list" "$(cat "$tmp/envs.err")"; fi
out=$("$crl" envs --backend classic 2>&1); rc=$?
if [ "$rc" -eq 0 ] && [ "$(grep -c '^classic/' <<<"$out")" -eq 5 ] && ! grep -q goodenv <<<"$out" &&
    [ "$(wc -l <<<"$out")" -eq 5 ]; then ok "crl envs --backend classic lists only classic's five ids"
else nok "crl envs --backend classic (exit $rc)" "$out"; fi
expect 2 "clasic.*did you mean 'classic'" "an unknown backend is exit 2 with a hint" -- envs --backend clasic "$noauto"
expect 2 "backend needs" "--backend without a name is a usage error" -- envs --backend
# A backend this tree builds as a plugin but that is not loaded: exit 2 naming its plugin and how to get it
# (on the plugin path, or the configure switch and packages when this build left it out).
expect 2 "env backend 'gym' is not registered: .*plugin 'gym' \\(gym\.so\).*(CRL_PLUGIN_PATH|--enable-gym)" \
    "crl envs --backend gym without the gym plugin names the plugin and how to get it" -- envs --backend gym "$noauto"
expect 2 "env backend 'dm_control' is not registered: .*(CRL_PLUGIN_PATH|--enable-dm-control)" \
    "crl envs --backend dm_control without its plugin says how to get it" -- envs --backend dm_control "$noauto"
expect 2 "unknown option '--bogus'" "crl envs rejects an unknown option" -- envs --bogus "$noauto"

# ---- crl inspect -----------------------------------------------------------
out=$("$crl" inspect "${pendulum[@]}" "$noauto" 2>&1); rc=$?
if [ "$rc" -eq 0 ] && grep -A1 -E '^observation_spec:' <<<"$out" | grep -q 'CompositeSpec(' &&
    sed -n '/^observation_spec:/,/^action_spec:/p' <<<"$out" | grep -qE '^ +observation: BoundedTensorSpec\('
then ok "inspect Pendulum-v1: the observation is a BoundedTensorSpec"
else nok "inspect Pendulum-v1 (exit $rc)" "$out"; fi
# Discrete actions are one-hot by default (TorchRL GymEnv's categorical_action_encoding=False).
out=$("$crl" inspect "${cartpole[@]}" "$noauto" 2>&1); rc=$?
if [ "$rc" -eq 0 ] && sed -n '/^action_spec:/,/^reward_spec:/p' <<<"$out" | grep -qE '^( +action: )?OneHotDiscreteTensorSpec\('
then ok "inspect CartPole-v1: the action is a OneHotDiscreteTensorSpec"
else nok "inspect CartPole-v1 (exit $rc)" "$out"; fi
out=$("$crl" inspect "${cartpole[@]}" env.categorical_action_encoding=true "$noauto" 2>&1); rc=$?
if [ "$rc" -eq 0 ] && sed -n '/^action_spec:/,/^reward_spec:/p' <<<"$out" | grep -qE '^( +action: )?DiscreteTensorSpec\('
then ok "inspect CartPole-v1 categorical_action_encoding=true: the action is a DiscreteTensorSpec"
else nok "inspect CartPole-v1 categorical (exit $rc)" "$out"; fi
out=$("$crl" inspect --json "${pendulum[@]}" "$noauto" 2>&1); rc=$?
if [ "$rc" -eq 0 ] && python3 -c '
import json, sys
d = json.load(sys.stdin)
assert d["backend"] == "classic" and d["id"] == "Pendulum-v1", d
obs = d["observation_spec"]["entries"]["observation"]
assert obs["kind"] == "Bounded" and obs["dtype"] == "float32" and obs["shape"] == [3], obs
assert obs["low"] == [-1.0, -1.0, -8.0] and obs["high"] == [1.0, 1.0, 8.0], obs
act = d["action_spec"]["entries"]["action"]
assert act["kind"] == "Bounded" and act["low"] == [-2.0] and act["high"] == [2.0], act
assert set(d["done_spec"]["entries"]) == {"done", "terminated", "truncated"}, d["done_spec"]
' <<<"$out"; then ok "inspect --json gives Pendulum's bounds"
else nok "inspect --json Pendulum-v1 (exit $rc)" "$out"; fi
out=$("$crl" inspect --json "${cartpole[@]}" "$noauto" 2>&1); rc=$?
if [ "$rc" -eq 0 ] && python3 -c '
import json, sys
d = json.load(sys.stdin)
act = d["action_spec"]["entries"]["action"]
assert act["kind"] == "OneHot" and act["n"] == 2 and act["dtype"] == "int64" and act["shape"] == [2], act
obs = d["observation_spec"]["entries"]["observation"]
assert obs["high"][1] == "inf" and obs["low"][1] == "-inf", obs
' <<<"$out"; then ok "inspect --json gives CartPole's one-hot action and infinite bounds as strings"
else nok "inspect --json CartPole-v1 (exit $rc)" "$out"; fi
expect 2 "CartPol-v1.*CartPole-v1" "an unknown env id is exit 2 naming close matches" \
    -- inspect env.backend=classic env.id=CartPol-v1 "$noauto"
expect 2 "no \\[env\\] section" "inspect without an [env] section is a usage error" -- inspect "$noauto"
expect 0 "pixels" "inspect of the pendulum-pixels example shows pixels" -- inspect "$examples/pendulum-pixels.ini" "$noauto"

# ---- crl rollout -----------------------------------------------------------
out=$("$crl" rollout "${pendulum[@]}" --steps 20 "$noauto" 2>&1); rc=$?
if [ "$rc" -eq 0 ] && grep -q '^TensorDict($' <<<"$out" && grep -q 'batch_size=torch.Size(\[20\])' <<<"$out" &&
    grep -qE '^ +next: TensorDict\($' <<<"$out" && grep -q '^summary:' <<<"$out" &&
    grep -qE 'steps: +20 ' <<<"$out" && grep -qE 'episodes completed: +0$' <<<"$out" &&
    grep -qE 'partial return: +-?[0-9]' <<<"$out"
then ok "rollout --steps 20 on Pendulum prints the TensorDict and the summary"
else nok "rollout --steps 20 Pendulum-v1 (exit $rc)" "$out"; fi
expect 2 "steps N is required" "rollout without --steps is a usage error" -- rollout "${pendulum[@]}" "$noauto"
expect 2 "steps '0'" "rollout --steps 0 is a usage error" -- rollout "${pendulum[@]}" --steps 0 "$noauto"
expect 2 "seed 'x'" "rollout --seed x is a usage error" -- rollout "${pendulum[@]}" --steps 2 --seed x "$noauto"

a=$("$crl" rollout "${pendulum[@]}" --steps 20 --seed 3 --json "$noauto" 2>&1); rca=$?
b=$("$crl" rollout "${pendulum[@]}" --steps 20 --seed 3 --json "$noauto" 2>&1); rcb=$?
c=$("$crl" rollout "${pendulum[@]}" --steps 20 --seed 4 --json "$noauto" 2>&1); rcc=$?
if [ "$rca$rcb$rcc" = 000 ] && [ "$a" = "$b" ] && [ "$a" != "$c" ]; then
    ok "the same --seed gives the same rollout, another seed another one"
else nok "rollout --seed (exits $rca $rcb $rcc; same: $([ "$a" = "$b" ] && echo y); differ: $([ "$a" != "$c" ] && echo y))" "$a" "$c"; fi
if python3 -c '
import json, sys
d = json.load(sys.stdin)
for k in ["action", "observation", "done", "next.observation", "next.reward", "next.done", "next.terminated"]:
    assert k in d, (k, list(d))
o, no = d["observation"], d["next.observation"]
assert o["dtype"] == "float32" and o["shape"] == [20, 3] and len(o["data"]) == 20, o["shape"]
assert d["next.reward"]["shape"] == [20, 1], d["next.reward"]["shape"]
assert d["action"]["shape"] == [20, 1] and all(-2 <= x[0] <= 2 for x in d["action"]["data"])
assert o["data"][1:] == no["data"][:-1], "observation[1:] != next.observation[:-1]"
assert all(v is False for (v,) in d["next.done"]["data"]), d["next.done"]
' <<<"$a"; then ok "rollout --json holds every entry as nested arrays"
else nok "rollout --json content" "$a"; fi
# The simulator state only with env.return_state=true (TorchRL's GymEnv has an empty state spec).
a=$("$crl" rollout "${pendulum[@]}" --steps 3 --json "$noauto" 2>&1); rca=$?
b=$("$crl" rollout "${pendulum[@]}" --steps 3 --json env.return_state=true "$noauto" 2>&1); rcb=$?
if [ "$rca$rcb" = 00 ] && python3 -c '
import json, sys
a, b = (json.loads(x) for x in sys.argv[1:3])
assert "state" not in a and "next.state" not in a, list(a)
assert b["state"]["dtype"] == "float64" and b["state"]["shape"] == [3, 2], b["state"]
assert b["next.state"]["shape"] == [3, 2]
assert a["next.observation"] == b["next.observation"]
' "$a" "$b"; then ok "rollout has no state entry unless env.return_state=true"
else nok "return_state in rollouts (exits $rca $rcb)" "$a" "$b"; fi
out=$("$crl" inspect "${pendulum[@]}" "$noauto" 2>&1); rc=$?
if [ "$rc" -eq 0 ] && [ "$(sed -n '/^state_spec:$/,+2p' <<<"$out")" = "state_spec:
CompositeSpec(
, device=cpu, shape=torch.Size([]))" ]; then ok "inspect prints an empty state spec, as TorchRL's GymEnv"
else nok "inspect state_spec (exit $rc)" "$out"; fi
# The [env] seed of a file is used, and --seed overrides it.
a=$("$crl" rollout "$examples/cartpole-random.ini" --steps 5 --json "$noauto" 2>&1)
b=$("$crl" rollout "$examples/cartpole-random.ini" --steps 5 --json env.seed=0 "$noauto" 2>&1)
c=$("$crl" rollout "$examples/cartpole-random.ini" --steps 5 --json --seed 1 "$noauto" 2>&1)
if [ "$a" = "$b" ] && [ "$a" != "$c" ]; then ok "--seed overrides the [env] seed of a file"
else nok "[env] seed vs --seed" "$a" "$c"; fi
# As TorchRL's rollout (break_when_any_done=True) it stops at the first done; --auto-reset runs on.
out=$("$crl" rollout "$examples/cartpole-random.ini" --steps 200 "$noauto" 2>&1); rc=$?
t=$(sed -nE 's/^ +steps: +([0-9]+) .*/\1/p' <<<"$out")
if [ "$rc" -eq 0 ] && [ -n "$t" ] && [ "$t" -lt 200 ] && grep -qE 'episodes completed: +1$' <<<"$out" &&
    grep -q "stopped: *after step $t of 200, at the first done" <<<"$out" &&
    grep -q "batch_size=torch.Size(\[$t\])" <<<"$out"
then ok "rollout stops after the step of the first done (step $t of 200) and says so"
else nok "rollout stops at the first done (exit $rc, steps '$t')" "$out"; fi
a=$("$crl" rollout "$examples/cartpole-random.ini" --steps 200 --json "$noauto" 2>&1)
if python3 -c '
import json, sys
d = json.load(sys.stdin)
done = [v for (v,) in d["next.done"]["data"]]
assert done[-1] is True and not any(done[:-1]), done
' <<<"$a"; then ok "the stopped rollout ends on its only done step"
else nok "rollout --json of the stopped rollout" "$a"; fi
out=$("$crl" rollout "$examples/cartpole-random.ini" --steps 200 --auto-reset "$noauto" 2>&1); rc=$?
if [ "$rc" -eq 0 ] && grep -qE 'steps: +200 ' <<<"$out" && grep -qE 'episodes completed: +([2-9]|[1-9][0-9]+)$' <<<"$out" &&
    ! grep -q "stopped:" <<<"$out"
then ok "rollout --auto-reset runs all 200 steps through several episodes"
else nok "rollout --auto-reset (exit $rc)" "$out"; fi
expect 0 "--auto-reset +reset ended episodes" "rollout --help explains --auto-reset" -- rollout --help

# Replayed actions.
printf '0\n1\n\n# a comment\n1\n0\n1\n' >"$tmp/cartpole.txt"
a=$("$crl" rollout "${cartpole[@]}" --steps 5 --seed 9 --actions "$tmp/cartpole.txt" --json "$noauto" 2>&1); rca=$?
b=$("$crl" rollout "${cartpole[@]}" --steps 5 --seed 9 --actions "$tmp/cartpole.txt" --json "$noauto" 2>&1); rcb=$?
c=$("$crl" rollout "${cartpole[@]}" --steps 5 --seed 9 --actions "$tmp/cartpole.txt" --json \
    env.categorical_action_encoding=true "$noauto" 2>&1); rcc=$?
if [ "$rca$rcb$rcc" = 000 ] && [ "$a" = "$b" ] && python3 -c '
import json, sys
a, c = (json.loads(x) for x in sys.argv[1:3])
assert a["action"]["data"] == [[1,0],[0,1],[0,1],[1,0],[0,1]], a["action"]
assert c["action"]["data"] == [0,1,1,0,1], c["action"]
assert a["next.observation"] == c["next.observation"]
' "$a" "$c"
then ok "--actions replays a file's action indices, one-hot or categorical, to the same trajectory"
else nok "--actions CartPole (exits $rca $rcb $rcc)" "$a" "$b" "$c"; fi
printf '1.5\n-2\n0.25\n' >"$tmp/pendulum.txt"
a=$("$crl" rollout "${pendulum[@]}" --steps 3 --actions "$tmp/pendulum.txt" --json "$noauto" 2>&1); rc=$?
if [ "$rc" -eq 0 ] &&
    python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["action"]["data"] == [[1.5],[-2],[0.25]], d["action"]' <<<"$a"
then ok "--actions replays a file's float actions"
else nok "--actions Pendulum (exit $rc)" "$a"; fi
printf '0\n1\nleft\n1\n' >"$tmp/bad.txt"
expect 2 "$tmp/bad.txt:3: 'left' is not an integer" "a malformed actions line is exit 2 naming FILE:LINE" \
    -- rollout "${cartpole[@]}" --steps 4 --actions "$tmp/bad.txt" "$noauto"
printf '0\n1 0 1\n' >"$tmp/bad2.txt"
expect 2 "$tmp/bad2.txt:2: 3 values" "an action with too many values is exit 2 naming FILE:LINE" \
    -- rollout "${cartpole[@]}" --steps 2 --actions "$tmp/bad2.txt" "$noauto"
printf '0\n7\n' >"$tmp/bad3.txt"
expect 2 "$tmp/bad3.txt:2: " "an out-of-range action is exit 2 naming FILE:LINE" \
    -- rollout "${cartpole[@]}" --steps 2 --actions "$tmp/bad3.txt" "$noauto"
expect 2 "holds 5 actions but --steps is 8" "too few actions is exit 2 naming the count" \
    -- rollout "${cartpole[@]}" --steps 8 --actions "$tmp/cartpole.txt" "$noauto"
expect 2 "cannot read actions file '$tmp/none.txt'" "a missing actions file is exit 2 naming it" \
    -- rollout "${cartpole[@]}" --steps 2 --actions "$tmp/none.txt" "$noauto"

# Frames: N+1 valid PNGs of the render size.
out=$("$crl" rollout "${pendulum[@]}" --steps 4 --save-frames "$tmp/frames" "$noauto" 2>&1); rc=$?
size=$("$crl" inspect --json "${pendulum[@]}" "$noauto" |
    python3 -c 'import json,sys; r=json.load(sys.stdin)["render"]; print(r["width"], r["height"])')
if [ "$rc" -eq 0 ] && [ "$(ls "$tmp/frames" | wc -l)" -eq 5 ] && python3 - "$tmp/frames" $size <<'EOF'
import os, struct, sys
d, w, h = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
names = sorted(os.listdir(d))
assert names == ["frame_%05d.png" % i for i in range(5)], names
for name in names:
    data = open(os.path.join(d, name), "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", name
    length, kind = struct.unpack(">I4s", data[8:16])
    assert kind == b"IHDR" and length == 13, name
    fw, fh, depth, colour = struct.unpack(">IIBB", data[16:26])
    assert (fw, fh) == (w, h) and depth == 8, (name, fw, fh, w, h)
EOF
then ok "--save-frames writes N+1 valid PNGs of the render size"
else nok "--save-frames (exit $rc, size '$size')" "$out" "$(ls -l "$tmp/frames" 2>&1)"; fi
# Frame content: countenv's Count-v0 paints pixel (y, x) of env 0 as
# (counter, 0, y * 8 + x), and its observation is (counter, 0).
cat >"$tmp/frames.py" <<'EOF'
import json, os, struct, sys, zlib
d = json.load(sys.stdin)
counters = [o[0] for o in d["observation"]["data"]] + [d["next.observation"]["data"][-1][0]]
def decode(path):
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", path
    pos, idat = 8, b""
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, colour = struct.unpack(">IIBB", body[:10])
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    assert depth == 8 and colour in (2, 6), (depth, colour)
    bpp = 3 if colour == 2 else 4
    raw, stride, rows, prev = zlib.decompress(idat), w * bpp, [], bytearray(w * bpp)
    for y in range(h):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for x in range(stride):
            a = line[x - bpp] if x >= bpp else 0
            b, c = prev[x], (prev[x - bpp] if x >= bpp else 0)
            p = a + b - c
            paeth = a if abs(p - a) <= abs(p - b) and abs(p - a) <= abs(p - c) else b if abs(p - b) <= abs(p - c) else c
            line[x] = (line[x] + [0, a, b, (a + b) // 2, paeth][f]) & 0xFF
        rows.append([tuple(line[x * bpp:x * bpp + 3]) for x in range(w)])
        prev = line
    return w, h, rows
names = sorted(os.listdir(sys.argv[1]))
assert len(names) == len(counters) == 4, (names, counters)
for k, name in enumerate(names):
    w, h, rows = decode(os.path.join(sys.argv[1], name))
    assert (w, h) == (8, 6), (w, h)
    for y in range(h):
        for x in range(w):
            assert rows[y][x] == (int(counters[k]), 0, y * 8 + x), (name, y, x, rows[y][x], counters[k])
EOF
out=$("$crl" rollout plugins.load=countenv env.backend=countenv env.id=Count-v0 --steps 3 --json \
    --save-frames "$tmp/count" 2>"$tmp/count.err"); rc=$?
if [ "$rc" -eq 0 ] && python3 "$tmp/frames.py" "$tmp/count" <<<"$out" 2>"$tmp/count.py"; then
    ok "--save-frames writes the rendered RGB bytes (countenv Count-v0)"
else nok "--save-frames content (exit $rc)" "$out" "$(cat "$tmp/count.err" "$tmp/count.py")"; fi
expect 1 "cannot render" "--save-frames on an env that cannot render is exit 1" \
    -- rollout plugins.load=countenv env.backend=countenv env.id=CountNoState-v0 --steps 2 --save-frames "$tmp/none"
touch "$tmp/file"
expect 1 "$tmp/file/sub" "--save-frames into an impossible directory is exit 1 naming it" \
    -- rollout "${pendulum[@]}" --steps 1 --save-frames "$tmp/file/sub" "$noauto"

# ---- crl bench envs ----------------------------------------------------------
out=$(CRL_BENCH_FFI_LIB= "$crl" bench envs --seconds 0.05 2>&1); rc=$?
if [ "$rc" -eq 0 ] && grep -qE "bit-exact: yes \(CartPole-v1" <<<"$out" &&
    grep -q "ffi vs native: skipped (set CRL_BENCH_FFI_LIB" <<<"$out"; then
    ok "crl bench envs runs, the host path is bit-exact, the ffi figure says why it is skipped"
else nok "crl bench envs (exit $rc)" "$out"; fi
# The ffi figure: the springmass library through the ffi backend and through tests/plugins/smnative.
smlib=${CRL_TEST_BUILDDIR:?}/ffi/.libs/libspringmass.so
out=$(CRL_BENCH_FFI_LIB=$smlib "$crl" bench envs --seconds 0.02 2>&1); rc=$?
if [ "$rc" -eq 0 ] && grep -q "native plugin (direct calls)" <<<"$out" && grep -q "ffi backend (ffi_call per env)" <<<"$out" && grep -q "ffi backend, calls = batch" <<<"$out" &&
    [ "$(grep -c "ffi/native time: [0-9.]*x per env, [0-9.]*x batch" <<<"$out")" -eq 2 ]; then
    ok "crl bench envs sets the ffi backend beside a native plugin over the same library (1 and 1024 envs)"
else nok "crl bench envs with CRL_BENCH_FFI_LIB (exit $rc)" "$out"; fi
out=$(CRL_BENCH_FFI_LIB=$smlib CRL_PLUGIN_PATH=${CRL_TEST_BUILDDIR}/../plugins/classic/.libs "$crl" bench envs \
    --seconds 0.01 2>&1); rc=$?
if [ "$rc" -eq 0 ] && grep -q "ffi vs native: skipped (plugin ffi is not on CRL_PLUGIN_PATH" <<<"$out"; then
    ok "crl bench envs skips the ffi figure naming a plugin it cannot find"
else nok "crl bench envs without the ffi plugin (exit $rc)" "$out"; fi

echo "1..$n"
[ "$failures" -eq 0 ]
