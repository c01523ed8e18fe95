#!/usr/bin/env bash
# /v1/audio/speech with the official OpenAI SDK (npm `openai`, unchanged, run
# with node; sdk_test/speech.mjs) through the gateway to an orchestrator of
# pipelines/local_tts.yaml: audio.speech.create in every served format, each
# read back by Debian's ffprobe with the right codec and rate and decoded by
# ffmpeg to as much audio as the wav (the text's); the mp3 body read as a
# stream of several chunks; stream_format "sse" carrying the raw pcm's bytes;
# refusals as the SDK's typed errors naming their field (BadRequestError 400
# voice and response_format, NotFoundError 404 model).
# Needs node, gateway/sdk_test/node_modules (./setup.sh) and ffmpeg.
# Stops what it starts, by PID.
set -euo pipefail

source gateway/sdk_test/setup.sh
sdk_setup gateway/sdk_test/speech.mjs openai
start_orchestrator pipelines/local_tts.yaml
pids="$pid"
trap 'kill -KILL $pids 2>/dev/null; wait $pids 2>/dev/null || true' EXIT
start_gateway gw --speech_orchestrator="127.0.0.1:$port"

"$NODE" "$SDK_DIR/speech.mjs" "http://127.0.0.1:$gw_port" "$out" >"$out/speech.json" 2>"$out/speech.err" ||
  fail "speech.mjs: $(cat "$out/speech.json" "$out/speech.err")"
echo "sdk: $(cat "$out/speech.json")"

samples() {
  local file="$1"
  shift
  ffmpeg -v error "$@" -i "$file" -f s16le -ac 1 -ar 24000 - | wc -c | awk '{print $1 / 2}'
}
want=$(samples "$out/speech.wav")
[ "$want" -gt 48000 ] || fail "wav: only $want samples for the text"
for spec in "mp3 mp3 24000 3000" "opus opus 48000 2000" "flac flac 24000 0" "wav pcm_s16le 24000 0" \
  "pcm pcm_s16le 24000 0"; do
  read -r format codec rate off <<<"$spec"
  input=()
  [ "$format" != pcm ] || input=(-f s16le -ar 24000 -ac 1)
  got=$(ffprobe -v error "${input[@]}" -show_entries stream=codec_name,sample_rate -of csv=p=0 \
    "$out/speech.$format" | tr ',' ' ')
  [ "$got" = "$codec $rate" ] || fail "$format: ffprobe reads '$got', not '$codec $rate'"
  n=$(samples "$out/speech.$format" "${input[@]}")
  diff=$((n > want ? n - want : want - n))
  [ "$diff" -le "$off" ] || fail "$format: $n samples decoded, the wav has $want"
  echo "$format: $codec at $rate Hz, $n samples"
done
cmp -s "$out/speech.sse.pcm" "$out/speech.pcm" || fail "sse: its audio is not the raw pcm's"
/usr/bin/python3 - "$out/refusals.json" <<'PY' || fail "refusals: $(cat "$out/refusals.json")"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["voice"] == {"status": 400, "param": "voice", "type": "BadRequestError"}, r["voice"]
assert r["format"] == {"status": 400, "param": "response_format", "type": "BadRequestError"}, r
assert r["model"]["status"] == 404 and r["model"]["type"] == "NotFoundError", r["model"]
PY
echo "PASS"
