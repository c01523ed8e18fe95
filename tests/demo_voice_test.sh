#!/usr/bin/env bash
# ./demo.sh --serve answers a voice app on its one gateway: a question spoken by
# the gateway's own speech route (/v1/audio/speech) is heard in a chat
# completion (input_audio, through the demo's fourth orchestrator, the voice
# agent) and answered in text; the same question streamed by talk.mjs at
# real-time pace into a Realtime session that keeps its default server VAD is
# heard, committed and answered by itself, in speech a real decoder reads; a
# text chat still goes to the demo pipeline. Stops what it starts.
set -euo pipefail
source tests/demo_serve.sh
source gateway/sdk_test/setup.sh
sdk_setup gateway/sdk_test/talk.mjs ws
command -v ffprobe >/dev/null || fail "ffprobe not found (./setup.sh installs ffmpeg)"

start_demo 0
base="http://127.0.0.1:$gateway_port"
question='{"model": "tts-1", "input": "What is the sea like?", "voice": "alloy"'
curl -sf "$base/v1/audio/speech" -d "$question, \"response_format\": \"pcm\"}" \
  -o "$out/question.pcm" || fail "speech as pcm"
curl -sf "$base/v1/audio/speech" -d "$question, \"response_format\": \"wav\"}" \
  -o "$out/question.wav" || fail "speech as wav"

# Chat completions hear the question.
printf '{"model": "omni-demo", "messages": [{"role": "user", "content": [{"type": "input_audio", "input_audio": {"data": "%s", "format": "wav"}}]}]}' \
  "$(base64 -w0 "$out/question.wav")" >"$out/chat.json"
curl -s "$base/v1/chat/completions" -d @"$out/chat.json" >"$out/chat.out" ||
  fail "chat with audio in: $(cat "$out/chat.out")"
grep -q '"finish_reason":"stop"' "$out/chat.out" || fail "chat with audio in: $(cat "$out/chat.out")"
grep -q '"content":"[A-Za-z]' "$out/chat.out" || fail "no answer: $(cat "$out/chat.out")"
echo "chat with audio in: $(head -c 300 "$out/chat.out")"

# A text chat is the demo pipeline's (the thinker first: stage 0's extra
# parameter sentences).
curl -sf "$base/v1/chat/completions" \
  -d '{"model": "omni-demo", "messages": [{"role": "user", "content": "Hi"}]}' >"$out/text.out" ||
  fail "text chat"
grep -q '"finish_reason":"stop"' "$out/text.out" || fail "text chat: $(cat "$out/text.out")"

# Realtime with the default server VAD: no commit, no response.create.
"$NODE" "$SDK_DIR/talk.mjs" --base="$base" --wav="$out/answer.wav" "$out/question.pcm" \
  >"$out/talk.out" 2>"$out/talk.err" || fail "talk: $(cat "$out/talk.out" "$out/talk.err")"
cat "$out/talk.err"
grep -q '^talk: speech started at [0-9]* ms' "$out/talk.err" || fail "no speech_started"
grep -q '^talk: speech stopped at [0-9]* ms' "$out/talk.err" || fail "no speech_stopped"
grep -q '^talk: response completed' "$out/talk.err" || fail "no completed response"
grep -q '[A-Za-z]' "$out/talk.out" || fail "no answer transcript"
seconds=$(ffprobe -v error -show_entries format=duration -of csv=p=0 "$out/answer.wav")
awk -v s="$seconds" 'BEGIN { exit !(s > 0.5) }' || fail "the answer's audio lasts $seconds s"
echo "realtime answer: $(cat "$out/talk.out") ($seconds s of audio)"

stop_demo
echo PASS
