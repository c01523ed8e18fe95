#!/usr/bin/env bash
# POST /v1/audio/speech through the gateway, as real processes on loopback: an
# orchestrator of pipelines/local_tts.yaml (talker -> vocoder, espeak-ng) as
# the gateway's --speech_orchestrator. Every served format is read back by
# Debian's ffprobe (its codec and rate) and decoded by ffmpeg to the same
# length of audio as the wav (the text's); "sse" carries, base64 in
# speech.audio.delta events, the very bytes of the raw stream, then
# speech.audio.done; voices are listed. Refusals are 4xx in OpenAI's shape
# naming the field (an unknown voice is the vocoder's own refusal, answered
# before any audio), a gateway without a speech pipeline answers 404 saying
# how to get one, and nothing is left in flight afterwards.
# Stops what it starts, by PID.
set -euo pipefail
source orchestrator/testing/orchestrator_process.sh

start_orchestrator pipelines/local_tts.yaml --metrics_listen=127.0.0.1:0
metrics=$(metrics_url)
pids="$pid"
trap 'kill -KILL $pids 2>/dev/null; wait $pids 2>/dev/null || true' EXIT
start_gateway gw --speech_orchestrator="127.0.0.1:$port"
base="http://127.0.0.1:$gw_port"
text="The quick brown fox jumps over the lazy dog. Then it rests."

# speak NAME JSON_FIELDS: POST /v1/audio/speech with the text and voice alloy
# plus JSON_FIELDS; body in $out/NAME, headers in $out/NAME.headers, the status
# on stdout.
speak() {
  curl -s -D "$out/$1.headers" -o "$out/$1" -w '%{http_code}' "$base/v1/audio/speech" \
    -H 'Content-Type: application/json' \
    -d "{\"model\": \"tts-1\", \"input\": \"$text\", \"voice\": \"alloy\"$2}"
}
# probe FILE [INPUT_FLAGS...]: "codec_name rate" as ffprobe reads FILE.
probe() {
  local file="$1"
  shift
  ffprobe -v error "$@" -show_entries stream=codec_name,sample_rate -of csv=p=0 "$file" |
    tr ',' ' '
}
# samples FILE [INPUT_FLAGS...]: how many 24 kHz mono samples ffmpeg decodes.
samples() {
  local file="$1"
  shift
  ffmpeg -v error "$@" -i "$file" -f s16le -ac 1 -ar 24000 - | wc -c | awk '{print $1 / 2}'
}

[ "$(speak speech.wav ', "response_format": "wav"')" = 200 ] || fail "wav: $(cat "$out/speech.wav")"
grep -qi '^Content-Type: audio/wav' "$out/speech.wav.headers" || fail "wav: wrong Content-Type"
[ "$(probe "$out/speech.wav")" = "pcm_s16le 24000" ] || fail "wav: $(probe "$out/speech.wav")"
want=$(samples "$out/speech.wav")
# The text takes seconds to say: 2 s at least.
[ "$want" -gt 48000 ] || fail "wav: only $want samples for the text"
echo "wav: $want samples ($(awk -v n="$want" 'BEGIN {print n / 24000}') s)"

# format CODEC RATE CONTENT_TYPE MAX_SAMPLES_OFF: the other formats, the same audio.
for spec in "mp3 mp3 24000 audio/mpeg 3000" "opus opus 48000 audio/ogg 2000" \
  "flac flac 24000 audio/flac 0" "pcm pcm_s16le 24000 audio/pcm 0" "default mp3 24000 audio/mpeg 3000"; do
  read -r format codec rate type off <<<"$spec"
  fields=", \"response_format\": \"$format\""
  [ "$format" != default ] || fields=""
  [ "$(speak "speech.$format" "$fields")" = 200 ] || fail "$format: $(head -c 300 "$out/speech.$format")"
  grep -qi "^Content-Type: $type" "$out/speech.$format.headers" || fail "$format: not $type"
  input=()
  [ "$format" != pcm ] || input=(-f s16le -ar 24000 -ac 1)
  got="$(probe "$out/speech.$format" "${input[@]}")"
  [ "$got" = "$codec $rate" ] || fail "$format: ffprobe reads '$got', not '$codec $rate'"
  n=$(samples "$out/speech.$format" "${input[@]}")
  diff=$((n > want ? n - want : want - n))
  [ "$diff" -le "$off" ] || fail "$format: $n samples decoded, the wav has $want"
  echo "$format: $codec at $rate Hz, $n samples"
done

# speed: twice as fast is about half as long (the vocoder's rate and pauses).
[ "$(speak speech.fast ', "response_format": "pcm", "speed": 2')" = 200 ] ||
  fail "speed 2: $(cat "$out/speech.fast")"
fast=$(($(wc -c <"$out/speech.fast") / 2))
[ "$fast" -gt $((want * 35 / 100)) ] && [ "$fast" -lt $((want * 70 / 100)) ] ||
  fail "speed 2: $fast samples against $want at speed 1"
echo "speed 2: $fast samples"

# sse: the raw pcm's bytes, base64 in delta events, then done with its usage.
[ "$(speak speech.sse ', "response_format": "pcm", "stream_format": "sse"')" = 200 ] ||
  fail "sse: $(cat "$out/speech.sse")"
grep -qi '^Content-Type: text/event-stream' "$out/speech.sse.headers" || fail "sse: not an event stream"
/usr/bin/python3 - "$out/speech.sse" "$out/speech.pcm" <<'PY' || fail "sse: not the raw stream's audio"
import base64, json, sys
events = [json.loads(line[6:]) for line in open(sys.argv[1]) if line.startswith("data: ")]
types = [e["type"] for e in events]
assert types[-1] == "speech.audio.done" and set(types[:-1]) == {"speech.audio.delta"}, types
assert events[-1]["usage"]["input_tokens"] > 0, events[-1]
audio = b"".join(base64.b64decode(e["audio"]) for e in events[:-1])
assert audio == open(sys.argv[2], "rb").read(), (len(audio), "bytes")
print("sse:", len(events) - 1, "delta event(s),", len(audio), "bytes")
PY

# Voices, by OpenAI's names.
curl -sf -o "$out/voices.json" "$base/v1/audio/voices" || fail "voices: no answer"
grep -q '"id":"alloy"' "$out/voices.json" || fail "voices: alloy is not listed"

# refused JSON_BODY STATUS PARAM: the status, and OpenAI's error naming PARAM.
refused() {
  local code
  code=$(curl -s -o "$out/refused.json" -w '%{http_code}' "$base/v1/audio/speech" -d "$1")
  [ "$code" = "$2" ] || fail "$1: HTTP $code, expected $2: $(cat "$out/refused.json")"
  grep -q "\"param\":\"$3\"" "$out/refused.json" || fail "$1: does not name $3: $(cat "$out/refused.json")"
}
refused '{"model": "tts-1", "input": "Hi", "voice": "nobody"}' 400 voice
refused '{"model": "tts-1", "input": "Hi", "voice": "alloy", "response_format": "aac"}' 400 response_format
refused '{"model": "tts-1", "input": "", "voice": "alloy"}' 400 input
refused '{"model": "tts-1", "input": "Hi", "voice": "alloy", "speed": 9}' 400 speed
refused '{"model": "whisper-1", "input": "Hi", "voice": "alloy"}' 404 model
# In OpenAI's range, but faster than espeak-ng speaks: the vocoder's refusal.
refused '{"model": "tts-1", "input": "Hi", "voice": "alloy", "speed": 4}' 400 speed
grep -q 'nobody' "$out/gw.err" && fail "a refused voice is logged as the gateway's failure"

# Nothing left in flight on the orchestrator.
expect_idle "$metrics"

# How a listener heard it, on both sides: the eight answers with audio (wav,
# five formats, speed 2, sse), none of the refusals; the same seconds of
# audio; the access lines carry it.
# series URL NAME: the value of the series NAME (with its labels) at URL.
series() { curl -sf "$1" | awk -v s="$2" '$1 == s {print $2}'; }
route='{route="/v1/audio/speech"}'
heard=$(series "$base/metrics" "omnistage_gateway_time_to_first_audio_seconds_count$route")
[ "$heard" = 8 ] || fail "the gateway timed the first audio of $heard answers, not 8"
[ "$(series "$metrics" omnistage_time_to_first_audio_seconds_count)" = 8 ] ||
  fail "the orchestrator timed the first audio of $(series "$metrics" omnistage_time_to_first_audio_seconds_count) requests"
gw_audio=$(series "$base/metrics" "omnistage_gateway_audio_seconds_total$route")
orch_audio=$(series "$metrics" omnistage_audio_seconds_total)
awk -v a="$gw_audio" -v b="$orch_audio" -v n="$want" \
  'BEGIN {exit !(a > 7 * n / 24000 && (a - b) ^ 2 < 1e-6)}' ||
  fail "audio seconds: the gateway wrote $gw_audio, the orchestrator sent $orch_audio"
stalls=$(series "$base/metrics" "omnistage_gateway_playback_stalls_total$route")
[ -n "$stalls" ] || fail "the gateway counts no stalls"
lines=$(grep -c ' access .* first_audio_ms=[0-9.]* rtf=[0-9.]* stalls=[0-9]* stalled_ms=' "$out/orch.err" || true)
[ "$lines" = 8 ] || fail "$lines access lines say how the audio was heard, not 8"
echo "heard: 8 answers, $gw_audio s of audio, $stalls stall(s) at the gateway"

# SIGTERM drains: a long speech stream read slowly (some 9 MB of pcm at 2 MB/s,
# more than the socket buffers hold) ends whole, and the drain line counts it.
long_text=$(printf "$text %.0s" $(seq 1 50))
start_gateway draining --speech_orchestrator="127.0.0.1:$port"
curl -s --limit-rate 2M -o "$out/drained.pcm" "http://127.0.0.1:$gw_port/v1/audio/speech" \
  -d "{\"model\": \"tts-1\", \"input\": \"$long_text\", \"voice\": \"alloy\", \"response_format\": \"pcm\"}" &
slow=$!
pids="$pids $slow"
for _ in $(seq 1 100); do
  [ -s "$out/drained.pcm" ] && break
  sleep 0.05
done
kill -TERM "$gw"
wait "$slow" || fail "the drained speech request failed"
wait "$gw" || fail "the draining gateway exited $?"
drained=$(wc -c <"$out/drained.pcm")
# 50 times the text, less the pauses between its clauses: at least 45 times.
[ "$drained" -gt $((want * 2 * 45)) ] || fail "the drained speech ended cut: $drained bytes"
grep -aq ', 1 speech request(s) and 0 transcription(s) get as long' "$out/draining.err" ||
  fail "drain line: $(grep -a draining "$out/draining.err")"

# A gateway without a speech pipeline says how to get one.
start_gateway plain
code=$(curl -s -o "$out/plain.json" -w '%{http_code}' "http://127.0.0.1:$gw_port/v1/audio/speech" \
  -d '{"model": "tts-1", "input": "Hi", "voice": "alloy"}')
[ "$code" = 404 ] || fail "no speech pipeline: HTTP $code"
grep -q -- '--speech_orchestrator' "$out/plain.json" || fail "the 404 does not say how: $(cat "$out/plain.json")"
echo "PASS"
