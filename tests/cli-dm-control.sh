#!/usr/bin/env bash
# Shell tests of `crl` over the dm_control backend: the tutorial's pixel
# rollout writes frames that show the acrobot and change, and
# `crl bench dm_control` runs.
set -uo pipefail
crl=${CRL:?}
n=0; failures=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
nok() { n=$((n + 1)); failures=$((failures + 1)); echo "not ok $n - $1"; shift; printf '%s\n' "$@" | sed 's/^/# /'; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/crl-dmc.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
noauto=plugins.autoload=false
acrobot=(plugins.load=dm_control env.backend=dm_control env.id=acrobot/swingup)

out=$("$crl" rollout "${acrobot[@]}" env.from_pixels=true --steps 5 --save-frames "$tmp/out" "$noauto" 2>&1); rc=$?
# Decoded rows (PNG filters undone) of each frame: not blank (many colours,
# an arm-coloured patch), and every frame differs from the one before.
if [ "$rc" -eq 0 ] && python3 - "$tmp/out" <<'EOF'
import os, struct, sys, zlib
d = sys.argv[1]
names = sorted(os.listdir(d))
assert names == ["frame_%05d.png" % i for i in range(6)], names
def decode(path):
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, w, h = 8, b"", 0, 0
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            w, h, depth, colour = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and colour == 2, (depth, colour)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw, stride, rows, prev = zlib.decompress(idat), 3 * w, [], bytearray(3 * w)
    for y in range(h):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - 3] if i >= 3 else 0
            b, c = prev[i], (prev[i - 3] if i >= 3 else 0)
            if f == 1: line[i] = (line[i] + a) & 255
            elif f == 2: line[i] = (line[i] + b) & 255
            elif f == 3: line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c; pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line)); prev = line
    assert (w, h) == (320, 240), (w, h)
    return b"".join(rows)
frames = [decode(os.path.join(d, n)) for n in names]
for i, px in enumerate(frames):
    colours = {px[k:k + 3] for k in range(0, len(px), 3)}
    arm = sum(1 for k in range(0, len(px), 3) if px[k] > 90 and px[k] > px[k + 1] + 20 and px[k + 1] > px[k + 2] + 15)
    assert len(colours) > 50 and arm > 200, (i, len(colours), arm)
    if i:
        assert px != frames[i - 1], "frame %d equals frame %d" % (i, i - 1)
EOF
then ok "rollout acrobot/swingup from_pixels --save-frames: 6 frames showing the arm, each differing"
else nok "rollout acrobot/swingup --save-frames (exit $rc)" "$out" "$(ls -l "$tmp/out" 2>&1)"; fi

out=$("$crl" rollout plugins.load=dm_control env.backend=dm_control env.domain=cartpole env.task=swingup \
    --steps 3 "$noauto" 2>&1); rc=$?
if [ "$rc" -eq 0 ] && grep -q "dm_control/cartpole/swingup" <<<"$out"; then ok "env.domain + env.task name the env"
else nok "env.domain + env.task (exit $rc)" "$out"; fi

out=$("$crl" rollout plugins.load=dm_control env.backend=dm_control env.id=acrobot/swingupp --steps 1 "$noauto" 2>&1); rc=$?
if [ "$rc" -ne 0 ] && grep -q "did you mean 'acrobot/swingup'" <<<"$out"; then ok "an unknown task suggests the close one"
else nok "unknown task (exit $rc)" "$out"; fi

# The same seeded rollout from the suite's own XML (vendored under tests/dm_control-suite) through
# [plugin.dm_control] suite_dir, generated models included, as from the bundled ones.
suite=${CRL_TEST_SRCDIR:?}/dm_control-suite
for id in cartpole/three_poles humanoid/walk swimmer/swimmer15 quadruped/fetch quadruped/escape stacker/stack_2 \
    lqr/lqr_6_2; do
    a=$("$crl" rollout plugins.load=dm_control env.backend=dm_control env.id=$id env.seed=5 --steps 10 --json \
        "$noauto" 2>&1); rca=$?
    b=$("$crl" rollout plugins.load=dm_control plugin.dm_control.suite_dir="$suite" env.backend=dm_control \
        env.id=$id env.seed=5 --steps 10 --json "$noauto" 2>&1); rcb=$?
    if [ "$rca" -eq 0 ] && [ "$rcb" -eq 0 ] && [ "$a" = "$b" ] && grep -q '"next.reward"' <<<"$a"; then
        ok "rollout $id from suite_dir equals the bundled model's"
    else nok "rollout $id: bundled (exit $rca) and suite_dir (exit $rcb) differ" "${a:0:300}" "${b:0:300}"; fi
done

out=$("$crl" bench dm_control --seconds 0.02 2>&1); rc=$?
if [ "$rc" -eq 0 ] && grep -q "mj_step" <<<"$out" && grep -q "frames/s" <<<"$out" &&
    grep -q "humanoid/walk" <<<"$out" && grep -q "stacker/stack_4" <<<"$out" && grep -q "lqr/lqr_6_2" <<<"$out" &&
    grep -q "quadruped/escape" <<<"$out"; then
    ok "crl bench dm_control runs, new tasks included"
else nok "crl bench dm_control (exit $rc)" "$out"; fi
# The probe counts cheetah's reset as the suite makes it: 200 settling steps (mj_step2, 199 mj_step, mj_step1)
# and Physics.reset's and after_reset's forwards, no extra clear.
if [ "$rc" -eq 0 ] && grep -q "crl/s+rst" <<<"$out" && grep -Eq "cheetah/run .* 0/200/2 " <<<"$out" &&
    grep -Eq "pendulum/swingup .* 0/0/2 " <<<"$out" && grep -Eq "lqr/lqr_2_1 .* no episodes " <<<"$out"; then
    ok "crl bench dm_control counts each task's reset physics"
else nok "crl bench dm_control reset counts" "$out"; fi
# The plugin's env ops alone, with the host's ratio over them, on every task's row.
rows=$(grep -Ec "^  [a-z_]+/[a-z0-9_]+ +[0-9]" <<<"$out")
plug=$(grep -Ec "^  [a-z_]+/[a-z0-9_]+ +[0-9].* [0-9]+ +[0-9.]+x +[0-9.]+x$" <<<"$out")
if [ "$rc" -eq 0 ] && grep -q "crl/plug" <<<"$out" && [ "$rows" -ge 39 ] && [ "$plug" -eq "$rows" ]; then
    ok "crl bench dm_control puts the host next to the plugin alone for each of its $rows tasks"
else nok "crl bench dm_control plugin columns ($plug of $rows rows)" "$out"; fi

out=$("$crl" bench dm_control --seconds 0.02 --only point_mass/hard,lqr/lqr_2_1 2>&1); rc=$?
if [ "$rc" -eq 0 ] && [ "$(grep -Ec "^  [a-z_]+/[a-z0-9_]+ +[0-9]" <<<"$out")" -eq 2 ] &&
    grep -q "^  point_mass/hard " <<<"$out" && grep -q "^  lqr/lqr_2_1 " <<<"$out" && ! grep -q "frames/s" <<<"$out"; then
    ok "crl bench dm_control --only runs just the named tasks"
else nok "crl bench dm_control --only (exit $rc)" "$out"; fi
out=$("$crl" bench dm_control --seconds 0.02 --only point_mass/easy,pendulum/swingupp 2>&1); rc=$?
if [ "$rc" -eq 2 ] && grep -q "no task 'pendulum/swingupp'" <<<"$out" && grep -q "pendulum/swingup," <<<"$out" &&
    ! grep -q "^  point_mass/easy " <<<"$out"; then
    ok "crl bench dm_control --only with an unknown task exits 2 naming it and the plugin's tasks"
else nok "crl bench dm_control --only unknown (exit $rc)" "$out"; fi
out=$("$crl" bench dm_control --seconds 0.02 --only '' 2>&1); rc=$?
if [ "$rc" -eq 2 ] && grep -q "name at least one" <<<"$out" && ! grep -q "^  task " <<<"$out"; then
    ok "crl bench dm_control --only '' exits 2 instead of running nothing"
else nok "crl bench dm_control --only '' (exit $rc)" "$out"; fi
out=$("$crl" bench dm_control --seconds 0.02 --only point_mass/easy,,lqr/lqr_2_1 2>&1); rc=$?
if [ "$rc" -eq 2 ] && grep -q "no task ''" <<<"$out"; then
    ok "crl bench dm_control --only with an empty name exits 2"
else nok "crl bench dm_control --only a,,b (exit $rc)" "$out"; fi
out=$("$crl" bench replay --only x 2>&1); rc=$?
if [ "$rc" -eq 2 ] && grep -q "goes with crl bench train or crl bench dm_control" <<<"$out"; then
    ok "--only is refused for benches without it"
else nok "crl bench replay --only (exit $rc)" "$out"; fi

echo "1..$n"
[ "$failures" -eq 0 ]
