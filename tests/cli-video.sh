#!/usr/bin/env bash
# Shell tests of MP4 videos: crl rollout --video, crl run's [train] record_video (env 0's first episode of
# each evaluation) and crl eval --video, each file decoded by FFmpeg's ffprobe (libavformat/libavcodec)
# with its frames counted: steps + 1 frames of the env's render size.
set -uo pipefail
crl=${CRL:?}
n=0; failures=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
nok() { n=$((n + 1)); failures=$((failures + 1)); echo "not ok $n - $1"; shift; printf '%s\n' "$@" | sed 's/^/# /'; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

out=$("$crl" rollout env.backend=classic env.id=CartPole-v1 --steps 5 --video "$tmp/probe.mp4" 2>&1); rc=$?
if [ "$rc" -eq 2 ] && grep -q "built without FFmpeg" <<<"$out"; then
    ok "a crl without FFmpeg refuses --video, saying what to install"
    echo "1..$n"; exit 0
fi
command -v ffprobe >/dev/null || { nok "ffprobe is needed (apt-get install ffmpeg)"; echo "1..$n"; exit 1; }
# "codec,width,height,frames" of a file's video stream, every frame decoded
probe() { ffprobe -v error -count_frames -select_streams v:0 -show_entries stream=codec_name,width,height,nb_read_frames -of csv=p=0 "$1" 2>&1; }

out=$("$crl" rollout env.backend=classic env.id=CartPole-v1 env.seed=3 --steps 200 --video "$tmp/cp.mp4" 2>&1); rc=$?
T=$(sed -n 's/^  steps: *\([0-9]*\) .*/\1/p' <<<"$out")
p=$(probe "$tmp/cp.mp4")
if [ "$rc" -eq 0 ] && [ -n "$T" ] && [[ "$p" =~ ^(h264|mpeg4),600,400,$((T + 1))$ ]] && grep -qE "wrote .*: $((T + 1)) frames of env 0 \((libx264|mpeg4)\)" <<<"$out"
then ok "crl rollout --video: CartPole's $T steps as $((T + 1)) frames of 600x400 ($p)"
else nok "crl rollout --video (exit $rc, T=$T, probe '$p')" "$out"; fi

out=$("$crl" rollout env.backend=classic env.id=Pendulum-v1 --steps 20 --auto-reset --video "$tmp/pe.mp4" 2>&1); rc=$?
p=$(probe "$tmp/pe.mp4")
if [ "$rc" -eq 0 ] && [[ "$p" =~ ^(h264|mpeg4),500,500,21$ ]]; then ok "Pendulum: 20 steps, 21 frames of 500x500"
else nok "Pendulum --video (exit $rc, probe '$p')" "$out"; fi

cat > "$tmp/cp.ini" <<'INI'
[plugins]
load = classic, losses
[env]
backend = classic
id = CartPole-v1
seed = 0
[collector]
frames_per_batch = 256
total_frames = 1024
[loss]
type = ppo
num_cells = 16
[train]
epochs = 1
eval_interval = 512
eval_episodes = 1
record_video = true
INI
out=$("$crl" run "$tmp/cp.ini" train.run_dir="$tmp/run" --quiet 2>&1); rc=$?
good=0; bad=""
# one row per evaluation: the video of frame F holds the episode's steps + 1 frames (CartPole: return = steps)
while IFS=, read -r frames ret; do
    [ -z "$ret" ] && continue
    f=$(printf '%s/run/videos/eval-%09d.mp4' "$tmp" "$frames")
    p=$(probe "$f")
    if [[ "$p" =~ ^(h264|mpeg4),600,400,$(( ${ret%.*} + 1 ))$ ]]; then good=$((good + 1)); else bad+="frame $frames: return $ret, probe '$p'; "; fi
done < <(tail -n +2 "$tmp/run/metrics.csv" | cut -d, -f1,10)
if [ "$rc" -eq 0 ] && [ "$good" -eq 2 ] && [ -z "$bad" ] && [ "$(ls "$tmp/run/videos" | wc -l)" -eq 2 ]
then ok "record_video: each evaluation's episode as RUN_DIR/videos/eval-FRAMES.mp4 with its steps + 1 frames"
else nok "record_video (exit $rc, $good good)" "$out" "$bad" "$(ls "$tmp/run/videos" 2>&1)"; fi

out=$("$crl" eval "$tmp/run" --video "$tmp/e.mp4" --json 2>&1); rc=$?
ret=$(sed -n 's/.*"raw_returns":\[\([0-9.]*\)\].*/\1/p' <<<"$out")
p=$(probe "$tmp/e.mp4")
if [ "$rc" -eq 0 ] && [ -n "$ret" ] && [[ "$p" =~ ^(h264|mpeg4),600,400,$(( ${ret%.*} + 1 ))$ ]] \
    && cmp -s "$tmp/e.mp4" "$tmp/run/videos/eval-000001024.mp4"
then ok "crl eval --video: the run's last evaluation video again, byte for byte"
else nok "crl eval --video (exit $rc, return '$ret', probe '$p')" "$out"; fi

head -c 2000 "$tmp/cp.mp4" > "$tmp/cut.mp4"
p=$(probe "$tmp/cut.mp4")
if ! [[ "$p" =~ ^(h264|mpeg4),600,400,$((T + 1))$ ]]; then ok "a cut file does not pass the frame count ($p)"
else nok "a cut file passed" "$p"; fi

out=$("$crl" run "$tmp/cp.ini" train.run_dir="$tmp/run0" train.eval_episodes=0 2>&1); rc=$?
if [ "$rc" -eq 2 ] && grep -q "record_video = true records evaluations, but \[train\] eval_episodes = 0" <<<"$out"
then ok "record_video without evaluations: exit 2 naming both keys"
else nok "record_video with eval_episodes = 0 (exit $rc)" "$out"; fi

echo "1..$n"
[ "$failures" -eq 0 ]
