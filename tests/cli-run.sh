#!/usr/bin/env bash
# Shell tests of `crl run`: --dry-run, the run directory (config, metrics.csv,
# checkpoint, curve), plain progress lines off a terminal, --resume equal to an
# uninterrupted run byte for byte (a recurrent policy's carried state included, and checkpoints without
# it or with it damaged), and bad configs.
set -uo pipefail
crl=${CRL:?}
srcdir=${CRL_TEST_SRCDIR:?}
n=0; failures=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
nok() { n=$((n + 1)); failures=$((failures + 1)); echo "not ok $n - $1"; shift; printf '%s\n' "$@" | sed 's/^/# /'; }
ini=$srcdir/../conf/examples/cartpole-dqn.ini
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
short="collector.total_frames=3000 train.eval_interval=1500 train.eval_episodes=2"

out=$("$crl" run "$ini" --dry-run 2>&1); rc=$?
if [ "$rc" -eq 0 ] && grep -qE '^type = dqn +; .*cartpole-dqn.ini:' <<<"$out" && grep -qE '^tau = 0 +; default' <<<"$out" \
    && grep -qE '^max_grad_norm = 10 ' <<<"$out" && grep -qE '^checkpoint_interval = 0 +; default' <<<"$out"
then ok "--dry-run prints [loss], [optim], [train] with every default"
else nok "--dry-run (exit $rc)" "$out"; fi

out=$("$crl" run "$ini" $short train.run_dir="$tmp/a" 2>&1); rc=$?
d=$tmp/a
if [ "$rc" -eq 0 ] && [ -s "$d/config.ini" ] && [ -s "$d/experiment.ini" ] && grep -q '^crl: ' "$d/run.txt" \
    && grep -q 'losses' "$d/run.txt" && [ "$(head -1 "$d/metrics.csv")" = "frames,seconds,fps,episodes,recent_return,loss,eval_return,optim_steps,recent_raw_return,eval_raw_return" ] \
    && [ -s "$d/checkpoint/trainer.ckpt" ] && [ -d "$d/checkpoint/replay" ] \
    && [ "$(head -c 8 "$d/curve.png" | od -An -tx1 | tr -d ' \n')" = "89504e470d0a1a0a" ]
then ok "the run directory holds config.ini, experiment.ini, run.txt, metrics.csv, checkpoint/ and curve.png"
else nok "run directory (exit $rc)" "$out" "$(ls -R "$d" 2>&1)"; fi
if grep -qE '^frames 3000 +fps [0-9]+ +episodes [0-9]+ +return [0-9.]+ +loss [0-9.e+-]+ +eval [0-9.]+$' <<<"$out" \
    && ! grep -q $'\r' <<<"$out" && grep -qE '^  eval return: ' <<<"$out"
then ok "off a terminal the progress comes as plain lines (frames, fps, return, loss, eval)"
else nok "progress lines" "$out"; fi

# With eval_interval = 0 the only evaluation is the one at the end: it gets a row of its own, at the
# last batch's frame count, with the summary's eval return in it.
out=$("$crl" run "$ini" collector.total_frames=1000 train.eval_interval=0 train.eval_episodes=2 train.run_dir="$tmp/end" 2>&1); rc=$?
last=$(tail -1 "$tmp/end/metrics.csv" 2>/dev/null); prev=$(tail -2 "$tmp/end/metrics.csv" 2>/dev/null | head -1)
summary=$(sed -n 's/^  eval return: *//p' <<<"$out")
if [ "$rc" -eq 0 ] && [ -n "$summary" ] && [ "$(cut -d, -f7 <<<"$last")" = "$summary" ] \
    && [ "$(cut -d, -f1 <<<"$last")" = "$(cut -d, -f1 <<<"$prev")" ] && [ -z "$(cut -d, -f7 <<<"$prev")" ] \
    && [ "$(cut -d, -f7 "$tmp/end/metrics.csv" | grep -c .)" -eq 2 ]
then ok "eval_interval = 0: the end-of-run evaluation has its own metrics row, with the summary's return"
else nok "end-of-run evaluation row (exit $rc)" "$out" "$(cat "$tmp/end/metrics.csv" 2>&1)"; fi
out=$("$crl" run --resume "$tmp/end" collector.total_frames=2000 --quiet 2>&1); rc=$?
if [ "$rc" -eq 0 ] && grep -qF "took out the end-of-run evaluation row (1)" <<<"$out" \
    && [ "$(cut -d, -f1 "$tmp/end/metrics.csv" | uniq -d | wc -l)" -eq 1 ]
then ok "a resume past it takes that row out, saying so, and the new end has its own"
else nok "resume past the end-of-run evaluation (exit $rc)" "$out" "$(cat "$tmp/end/metrics.csv" 2>&1)"; fi

# N + N through --resume equals 2N byte for byte (checkpoint and metrics).
"$crl" run "$ini" $short collector.total_frames=6000 train.run_dir="$tmp/full" --quiet >/dev/null 2>&1
"$crl" run "$ini" $short train.run_dir="$tmp/half" --quiet >/dev/null 2>&1
out=$("$crl" run --resume "$tmp/half" collector.total_frames=6000 --quiet 2>&1); rc=$?
if [ "$rc" -eq 0 ] && cmp -s "$tmp/full/checkpoint/trainer.ckpt" "$tmp/half/checkpoint/trainer.ckpt" \
    && diff <(cut -d, -f1,4-8 "$tmp/full/metrics.csv") <(cut -d, -f1,4-8 "$tmp/half/metrics.csv") >/dev/null \
    && grep -q '^resumed at frame 3000' "$tmp/half/run.txt"
then ok "--resume: 3000 + 3000 frames give the checkpoint and metrics of 6000 in one go"
else nok "--resume (exit $rc)" "$out"; fi

# Sub-collectors with their own policy copies (num_collectors = 2, weights synced every 7 optimizer
# steps, so the copies act with older weights than the learner's at the checkpoint): the same.
copies="collector.num_collectors=2 distributed.sync_interval=7 collector.init_random_frames=200 train.eval_interval=0 train.eval_episodes=2 train.log_interval=300 --quiet"
"$crl" run "$ini" $copies collector.total_frames=1500 train.run_dir="$tmp/cfull" >/dev/null 2>&1
"$crl" run "$ini" $copies collector.total_frames=600 train.run_dir="$tmp/chalf" >/dev/null 2>&1
out=$("$crl" run --resume "$tmp/chalf" collector.total_frames=1500 --quiet 2>&1); rc=$?
if [ "$rc" -eq 0 ] && cmp -s "$tmp/cfull/checkpoint/trainer.ckpt" "$tmp/chalf/checkpoint/trainer.ckpt" \
    && diff -r "$tmp/cfull/checkpoint/replay" "$tmp/chalf/checkpoint/replay" >/dev/null \
    && diff <(cut -d, -f1,4-8 "$tmp/cfull/metrics.csv") <(cut -d, -f1,4-8 "$tmp/chalf/metrics.csv") >/dev/null \
    && [ "$(wc -l <"$tmp/cfull/metrics.csv")" -gt 4 ] && grep -q '^resumed at frame 600' "$tmp/chalf/run.txt"
then ok "--resume, num_collectors = 2 with policy copies: 600 + 900 frames give the checkpoint, replay and metrics of 1500"
else nok "--resume with policy copies (exit $rc)" "$out"; fi
# A one-sub-collector checkpoint has no copies to restore: resuming it as two is refused.
out=$("$crl" run --resume "$tmp/half" collector.num_collectors=2 --accept-changes --quiet 2>&1); rc=$?
if [ "$rc" -eq 2 ] && grep -qF "no section 'copies/counters': the checkpointed run had one sub-collector" <<<"$out"
then ok "--resume of a one-sub-collector run with num_collectors = 2: exit 2 naming the missing section"
else nok "--resume one as two (exit $rc)" "$out"; fi

# A recurrent policy (the masked-CartPole LSTM example, small): the state it carries (recurrent_state_h/_c)
# goes through the checkpoint too, so N + N frames equal 2N byte for byte.
lstm=$srcdir/../conf/examples/cartpole-masked-lstm-ppo.ini
lsmall="collector.frames_per_batch=256 env.num_envs=4 train.minibatch_size=64 train.eval_interval=512
        train.eval_episodes=1 train.log_interval=256 transform.norm.init_stats=50 --quiet"
"$crl" run "$lstm" $lsmall collector.total_frames=1536 train.run_dir="$tmp/lfull" >/dev/null 2>&1
"$crl" run "$lstm" $lsmall collector.total_frames=768 train.run_dir="$tmp/lhalf" >/dev/null 2>&1
cp -r "$tmp/lhalf" "$tmp/lold"
out=$("$crl" run --resume "$tmp/lhalf" collector.total_frames=1536 --quiet 2>&1); rc=$?
if [ "$rc" -eq 0 ] && [ -s "$tmp/lfull/checkpoint/trainer.ckpt" ] \
    && cmp -s "$tmp/lfull/checkpoint/trainer.ckpt" "$tmp/lhalf/checkpoint/trainer.ckpt" \
    && diff <(cut -d, -f1,4-8 "$tmp/lfull/metrics.csv") <(cut -d, -f1,4-8 "$tmp/lhalf/metrics.csv") >/dev/null \
    && [ "$(wc -l <"$tmp/lfull/metrics.csv")" -ge 6 ] && ! grep -q "not bitwise" <<<"$out"
then ok "--resume of an LSTM policy: 768 + 768 frames give the checkpoint and metrics of 1536 (the carried state kept)"
else nok "--resume of an LSTM policy (exit $rc)" "$out"; fi

# ckedit SRC DST OP NAME [N]: copy checkpoint SRC to DST with valid checksums, OP: drop (the sections
# NAME/...), cut (section NAME loses its last N bytes); or flip (a byte of section NAME, checksums kept).
# Written from the layout in core/checkpoint-private.h, independently of crl's reader and writer.
ckedit() {
    python3 - "$@" <<'PY'
import struct, sys, zlib
src, dst, op, name = sys.argv[1:5]
d = bytearray(open(src, 'rb').read())
fmt, kv, cnt, klen, toff, tsz = struct.unpack_from('<IIIIQQ', d, 8)
kind, secs, o = bytes(d[48:48 + klen]), [], toff
for _ in range(cnt):
    off, size, crc, nl, _z = struct.unpack_from('<QQIHH', d, o)
    secs.append((d[o + 24:o + 24 + nl].decode(), off, bytes(d[off:off + size])))
    o += 24 + nl
if op == 'flip':
    d[[s[1] for s in secs if s[0] == name][0]] ^= 0x40
    open(dst, 'wb').write(d)
    sys.exit(0)
if op == 'drop':
    secs = [s for s in secs if not s[0].startswith(name + '/')]
else:
    secs = [(s[0], s[1], s[2][:len(s[2]) - int(sys.argv[5])] if s[0] == name else s[2]) for s in secs]
a8 = lambda x: (x + 7) // 8 * 8
out, table = bytearray(a8(48 + klen)), bytearray()
for nm, _off, b in secs:
    out += bytes(a8(len(out)) - len(out))
    table += struct.pack('<QQIHH', len(out), len(b), zlib.crc32(b), len(nm), 0) + nm.encode()
    out += b
out += bytes(a8(len(out)) - len(out))
hdr = b'CRLCKPT\0' + struct.pack('<IIIIQQI', fmt, kv, len(secs), klen, len(out), len(table), zlib.crc32(table))
kpad = kind + bytes(a8(48 + klen) - 48 - klen)
hdr += struct.pack('<I', zlib.crc32(kpad, zlib.crc32(hdr))) + kpad
out[:len(hdr)] = hdr
open(dst, 'wb').write(out + table)
PY
}
# A checkpoint of an older crl, without the carried state: it resumes as before (the state recomputed, not
# bitwise), saying so on stderr.
ck=$tmp/lold/checkpoint/trainer.ckpt
cp "$ck" "$tmp/lold.ckpt"
ckedit "$tmp/lold.ckpt" "$ck" drop trainer/carried; erc=$?
out=$("$crl" run --resume "$tmp/lold" collector.total_frames=1536 --quiet 2>&1); rc=$?
if [ "$erc" -eq 0 ] && [ "$rc" -eq 0 ] \
    && grep -qF "the checkpoint keeps no carried state (an older crl wrote it), so re-collecting recomputed the state the policy carries (recurrent_state_c, recurrent_state_h)" <<<"$out" \
    && grep -qF "not bitwise" <<<"$out" && grep -qE '^  frames: +1536 ' <<<"$out"
then ok "--resume of an LSTM checkpoint without the carried state (an older crl's): resumes, not bitwise, saying so"
else nok "--resume without the carried state (edit exit $erc, exit $rc)" "$out"; fi
# The record of the state cut short (checksums right), a flipped byte in it, a truncated file: exit 1 naming
# the file and the section, and nothing changes in the run directory.
cp -r "$tmp/lfull" "$tmp/lbad"
good=$tmp/lfull/checkpoint/trainer.ckpt; bad=$tmp/lbad/checkpoint/trainer.ckpt
for what in cut flip trunc; do
    case $what in
        cut) ckedit "$good" "$bad" cut trainer/carried/0/0 4
             want="section 'trainer/carried/0/0' \\(leaf 'recurrent_state_[ch]'\\) holds [0-9]+ bytes; its dtype and shape need" ;;
        flip) ckedit "$good" "$bad" flip trainer/carried/0/1
              want="section 'trainer/carried/0/1' \([0-9]+ bytes\) fails its CRC-32 check" ;;
        trunc) head -c "$(($(wc -c <"$good") - 100))" "$good" >"$bad"
               want="file is truncated" ;;
    esac
    out=$("$crl" run --resume "$tmp/lbad" collector.total_frames=2048 --quiet 2>&1); rc=$?
    if [ "$rc" -eq 1 ] && grep -qF "resume from '$tmp/lbad/checkpoint': $bad: offset " <<<"$out" \
        && grep -qE "$want" <<<"$out" && cmp -s "$tmp/lfull/metrics.csv" "$tmp/lbad/metrics.csv"
    then ok "--resume of an LSTM checkpoint whose carried state is $what: exit 1 naming the file and section"
    else nok "carried state $what (exit $rc)" "$out"; fi
done

out=$("$crl" run --resume "$tmp/nothing" 2>&1); rc=$?
if [ "$rc" -eq 2 ] && grep -qF "$tmp/nothing/experiment.ini" <<<"$out"
then ok "--resume of a missing run directory: exit 2 naming the file"
else nok "--resume missing (exit $rc)" "$out"; fi

out=$("$crl" run "$ini" loss.gama=0.9 train.run_dir="$tmp/bad" 2>&1); rc=$?
if [ "$rc" -eq 2 ] && grep -qF "did you mean 'gamma'" <<<"$out" && [ ! -e "$tmp/bad" ]
then ok "a misspelt loss option: exit 2 with a did-you-mean, no run directory"
else nok "misspelt option (exit $rc)" "$out"; fi

out=$("$crl" run "$ini" loss.type=dqm train.run_dir="$tmp/bad" 2>&1); rc=$?
if [ "$rc" -eq 2 ] && grep -qF "dqn" <<<"$out"
then ok "an unknown loss type: exit 2 naming the registered ones"
else nok "unknown loss (exit $rc)" "$out"; fi

out=$("$crl" run "$ini" env.id=Pendulum-v1 train.run_dir="$tmp/bad" 2>&1); rc=$?
if [ "$rc" -eq 2 ] && grep -qF "discrete action" <<<"$out" && [ ! -e "$tmp/bad" ]
then ok "DQN on a continuous action: refused with the reason (exit 2, no run directory)"
else nok "dqn on Pendulum (exit $rc)" "$out"; fi

# Without [replay] batch_size the updates sample the buffer's one default, which config.ini shows.
grep -v '^batch_size' "$ini" > "$tmp/nobatch.ini"
out=$("$crl" run "$tmp/nobatch.ini" collector.total_frames=1500 train.eval_episodes=0 train.run_dir="$tmp/nobatch" \
      --quiet 2>&1); rc=$?
if [ "$rc" -eq 0 ] && grep -qE '^  optimizer steps: +[1-9][0-9]*$' <<<"$out" \
    && grep -qE '^batch_size = [1-9][0-9]* +; default' "$tmp/nobatch/config.ini"
then ok "no [replay] batch_size: the run trains with the buffer's default batch size"
else nok "no batch_size (exit $rc)" "$out"; fi

# --dry-run checks the experiment as the run would, without starting it.
out=$("$crl" run "$ini" --dry-run env.gravity=-1 train.run_dir="$tmp/dry" 2>&1); rc=$?
if [ "$rc" -eq 2 ] && grep -qF "command line: env backend 'classic' (id 'CartPole-v1'): make: [env] gravity" <<<"$out" \
    && [ ! -e "$tmp/dry" ]
then ok "--dry-run refuses an out-of-range physics constant (exit 2, naming where it was set)"
else nok "--dry-run with a bad value (exit $rc)" "$out"; fi

# Plain SGD at lr = 10 without clipping diverges: the run stops with the
# reason and keeps a checkpoint of the parameters before the failing update.
out=$("$crl" run "$ini" optim.type=sgd optim.lr=10 optim.max_grad_norm=0 collector.total_frames=5000 \
      train.run_dir="$tmp/nan" --quiet 2>&1); rc=$?
if [ "$rc" -eq 1 ] && grep -qE "stopped: frame [0-9]+: loss 'dqn': .*not finite" <<<"$out" \
    && grep -qF "$tmp/nan/checkpoint" <<<"$out" && [ -s "$tmp/nan/checkpoint/trainer.ckpt" ] && [ -s "$tmp/nan/curve.png" ]
then ok "a diverging loss stops the run (exit 1) with the frame and a checkpoint"
else nok "diverging loss (exit $rc)" "$out"; fi

# The ffi example: TD3 on the springmass C library described in INI, end to end (short).
smlib=${CRL_TEST_BUILDDIR:?}/ffi/.libs/libspringmass.so
out=$("$crl" run "$srcdir/../conf/examples/ffi-springmass.ini" env.library="$smlib" collector.total_frames=1500 \
      collector.init_random_frames=500 train.eval_interval=1500 train.eval_episodes=1 train.run_dir="$tmp/ffi" 2>&1); rc=$?
if [ "$rc" -eq 0 ] && [ -s "$tmp/ffi/checkpoint/trainer.ckpt" ] && grep -qE '^  eval return: +-?[0-9.]+' <<<"$out" \
    && [ "$(wc -l < "$tmp/ffi/metrics.csv")" -ge 2 ]
then ok "conf/examples/ffi-springmass.ini trains TD3 on a plain C library through the ffi backend"
else nok "ffi example (exit $rc)" "$out"; fi

# The pixel example, short: a conv network trains; a buffer of images checkpointed is warned about with its
# size, and [replay] checkpoint = false leaves it out of the checkpoint.
px=$srcdir/../conf/examples/cartpole-pixels-dqn.ini
pxshort="collector.total_frames=96 collector.init_random_frames=64 replay.capacity=100 train.eval_episodes=0"
out=$("$crl" run "$px" $pxshort replay.checkpoint=true train.run_dir="$tmp/px1" 2>&1); rc=$?
if [ "$rc" -eq 0 ] && grep -qE "checkpoint = true: the buffer holds image observations, about 5644800 bytes" <<<"$out" \
    && [ -d "$tmp/px1/checkpoint/replay" ] && [ -s "$tmp/px1/checkpoint/trainer.ckpt" ]
then ok "checkpointing a buffer of images warns with its size in bytes"
else nok "pixel buffer warning (exit $rc)" "$out" "$(ls -R "$tmp/px1" 2>&1)"; fi
out=$("$crl" run "$px" $pxshort train.run_dir="$tmp/px2" 2>&1); rc=$?
if [ "$rc" -eq 0 ] && ! grep -q "image observations" <<<"$out" && [ ! -e "$tmp/px2/checkpoint/replay" ] \
    && [ -s "$tmp/px2/checkpoint/trainer.ckpt" ]
then ok "cartpole-pixels-dqn.ini trains a conv network; [replay] checkpoint = false leaves the buffer out"
else nok "pixel example (exit $rc)" "$out" "$(ls -R "$tmp/px2" 2>&1)"; fi

echo "1..$n"
[ "$failures" -eq 0 ]
