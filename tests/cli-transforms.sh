#!/usr/bin/env bash
# Shell tests of the image transforms through `crl`: the pendulum-pixels-64
# example (inspect, rollout) and `crl bench transforms`.
set -uo pipefail
crl=${CRL:?}
srcdir=${CRL_TEST_SRCDIR:?}
n=0; failures=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
nok() { n=$((n + 1)); failures=$((failures + 1)); echo "not ok $n - $1"; shift; printf '%s\n' "$@" | sed 's/^/# /'; }
example=$srcdir/../conf/examples/pendulum-pixels-64.ini

# ---- crl inspect: the specs after ToTensorImage -> Resize(64, 64) -> GrayScale
out=$("$crl" inspect "$example" 2>&1); rc=$?
pix=$(sed -n '/pixels:/,/dtype=/p' <<<"$out")
if [ "$rc" -eq 0 ] && grep -qF 'torch.Size([1, 64, 64])' <<<"$pix" && grep -qF 'dtype=torch.float32' <<<"$pix"
then ok "inspect pendulum-pixels-64: pixels is float32 [1, 64, 64]"
else nok "inspect pendulum-pixels-64 (exit $rc)" "$out"; fi

out=$("$crl" inspect "$example" --json 2>&1); rc=$?
if [ "$rc" -eq 0 ] && grep -qE '"pixels":\{"kind":"Bounded","dtype":"float32","shape":\[1,64,64\]' <<<"$out"
then ok "inspect --json: Bounded float32 [1,64,64]"
else nok "inspect --json (exit $rc)" "$(head -c 2000 <<<"$out")"; fi

# print(env) as TorchRL prints a TransformedEnv, then the specs
want='env:
TransformedEnv(
    env=GymEnv(env=Pendulum-v1, batch_size=torch.Size([]), device=cpu),
    transform=Compose(
            ToTensorImage(keys=['"'"'pixels'"'"']),
            Resize(w=64, h=64, interpolation=InterpolationMode.BILINEAR, keys=['"'"'pixels'"'"']),
            GrayScale(keys=['"'"'pixels'"'"'])))
observation_spec:'
out=$("$crl" inspect "$example" 2>&1)
got=$(sed -n '/^env:$/,/^observation_spec:$/p' <<<"$out")
if [ "$got" = "$want" ]; then ok "inspect prints the TransformedEnv with its Compose as TorchRL does"
else nok "inspect's TransformedEnv repr" "$got"; fi
out=$("$crl" inspect "$example" --json env.transforms=totensor,norm,noop transform.norm.type=ObservationNorm \
    transform.norm.in_keys=pixels transform.norm.loc=2 transform.norm.scale=1 transform.noop.type=NoopResetEnv \
    transform.noop.noops=3 2>&1); rc=$?
if [ "$rc" -eq 0 ] && python3 -c '
import json, sys
d = json.load(sys.stdin)
reprs = [t["repr"] for t in d["transforms"]]
assert reprs == ["ToTensorImage(keys=[\x27pixels\x27])",
                 "ObservationNorm(loc=2.0000, scale=1.0000, keys=[\x27pixels\x27])",
                 "NoopResetEnv(noops=3, random=True)"], reprs
assert [t["name"] for t in d["transforms"]] == ["totensor", "norm", "noop"], d["transforms"]
assert d["repr"].startswith("TransformedEnv(\n    env=GymEnv(env=Pendulum-v1, "), d["repr"]
assert d["repr"].endswith("\n            NoopResetEnv(noops=3, random=True)))"), d["repr"]
' <<<"$out"; then ok "inspect --json: repr and transforms with ObservationNorm's and NoopResetEnv's TorchRL reprs"
else nok "inspect --json reprs (exit $rc)" "$(head -c 3000 <<<"$out")"; fi
out=$("$crl" inspect "$example" env.transforms= 2>&1); rc=$?
if [ "$rc" -eq 0 ] && [ "$(sed -n 2,3p <<<"$out")" = "env:
GymEnv(env=Pendulum-v1, batch_size=torch.Size([]), device=cpu)" ]
then ok "inspect without transforms prints the base env"
else nok "inspect without transforms: base env repr (exit $rc)" "$out"; fi

# the same env without transforms keeps the raw frames
out=$("$crl" inspect "$example" env.transforms= 2>&1); rc=$?
if [ "$rc" -eq 0 ] && grep -qF 'torch.Size([500, 500, 3])' <<<"$out" && grep -qF 'torch.uint8' <<<"$out"
then ok "inspect with env.transforms= empty: uint8 [500, 500, 3]"
else nok "inspect without transforms (exit $rc)" "$out"; fi

# a key the env does not have: named, with the keys it has
out=$("$crl" inspect "$example" env.pixels_only=false env.from_pixels=false 2>&1); rc=$?
if [ "$rc" -eq 2 ] && grep -qF "'pixels'" <<<"$out" && grep -qF "observation" <<<"$out"
then ok "inspect without from_pixels: the missing 'pixels' is named with the available keys"
else nok "inspect without from_pixels (exit $rc, wanted 2)" "$out"; fi

# ---- crl rollout through the chain
out=$("$crl" rollout "$example" --steps 3 2>&1); rc=$?
if [ "$rc" -eq 0 ] && grep -qF 'torch.Size([3, 1, 64, 64])' <<<"$out"
then ok "rollout pendulum-pixels-64: pixels [3, 1, 64, 64]"
else nok "rollout pendulum-pixels-64 (exit $rc)" "$out"; fi

# ---- crl bench transforms
out=$("$crl" bench transforms --seconds 0.02 2>&1); rc=$?
if [ "$rc" -eq 0 ] && grep -qE 'ToTensorImage .* [0-9.]+x$' <<<"$out" && grep -qE 'Resize bilinear .*[0-9.]+x$' <<<"$out" \
    && grep -qE 'GrayScale .*[0-9.]+x$' <<<"$out" && grep -qF 'memcpy MB/s' <<<"$out"
then ok "crl bench transforms prints MB/s next to memcpy"
else nok "crl bench transforms (exit $rc)" "$out"; fi

echo "1..$n"
[ "$failures" -eq 0 ]
