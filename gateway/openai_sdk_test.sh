#!/usr/bin/env bash
# The official OpenAI SDK (npm `openai`, unchanged, run with node) through the
# gateway to the demo pipeline (thinker -> talker -> vocoder), as real
# processes on loopback, with bearer tokens on:
# - a streamed chat completion with text and audio: the text equals what the
#   gRPC client (omni) gets for the same seed, and the audio is the same PCM;
# - the same, not streamed;
# - with --voice_stage, audio.voice picks the vocoder's voice;
# - every refusal arrives as the SDK's typed error (401, 400, 404);
# - a client that goes away mid-stream: the pipeline shows 0 in flight after;
# - 512 streams at once through the gateway, none lost;
# - the orchestrator's admission limit as 429, no orchestrator as 503;
# - an identity's request rate (tokens file) as 429 with Retry-After, which the
#   SDK's own retries wait by;
# - SIGTERM drains: a running stream ends whole.
# Needs node and gateway/sdk_test/node_modules (./setup.sh runs npm ci there).
# Stops what it starts, by PID.
set -euo pipefail

source gateway/sdk_test/setup.sh
sdk_setup gateway/sdk_test/sdk_test.mjs openai
slow="gateway-test-slow-$RANDOM$RANDOM"
write_tokens "$out/tokens.yaml" gateway-test "  - identity: one-per-2s
    role: user
    token: \"$slow\"
    requests_per_second: 0.5
    requests_burst: 1\n"
start_orchestrator pipelines/local_omni.yaml --tokens_file="$out/tokens.yaml"

# start_gateway NAME ORCHESTRATOR_PORT [FLAGS...]: a gateway on port 0, ready
# once it reaches a ready orchestrator; sets $gw_pid, $base.
start_gateway() {
  local name="$1" orchestrator_port="$2"
  shift 2
  gateway/gateway --orchestrator="127.0.0.1:$orchestrator_port" --listen=127.0.0.1:0 "$@" \
    >"$out/$name.out" 2>"$out/$name.err" &
  gw_pid=$!
  pids="$pids $gw_pid"
  local gw_port
  gw_port=$(listened_port "$name") || exit 1
  base="http://127.0.0.1:$gw_port"
  wait_healthy "$base"
}
pids="$pid"
trap 'kill -KILL $pids 2>/dev/null; wait $pids 2>/dev/null || true' EXIT
start_gateway gw "$port"
curl -sf "$base/health" >/dev/null || fail "gateway not healthy: $(curl -s "$base/health")"

sdk() {
  "$NODE" "$SDK_DIR/sdk_test.mjs" "$base" "$out" "$1" >"$out/$1.json" 2>"$out/$1.err" ||
    fail "$1: $(cat "$out/$1.json" "$out/$1.err")"
  echo "sdk $1: $(cat "$out/$1.json")"
}

# The gRPC client's answer to the same request (sdk_test.mjs: seed 7, 24 tokens).
"$omni" generate "$server" --prompt="Tell me about the sea." --modalities=text,audio \
  --max_tokens=0:24 --seed=0:7 --wav="$out/grpc.wav" >"$out/grpc.txt" 2>"$out/grpc.err" ||
  fail "omni generate: $(cat "$out/grpc.err")"

# The WAV's samples (after its 44-byte header) must be the same bytes.
same_pcm() { cmp -s <(tail -c +45 "$1") <(tail -c +45 "$2"); }

sdk stream
[ "$(cat "$out/stream.txt")" = "$(cat "$out/grpc.txt")" ] ||
  fail "streamed text differs: '$(cat "$out/stream.txt")' vs gRPC '$(cat "$out/grpc.txt")'"
[ "$(head -c 4 "$out/stream.wav")" = "RIFF" ] || fail "streamed audio is not WAV"
same_pcm "$out/stream.wav" "$out/grpc.wav" ||
  fail "streamed audio differs: $(stat -c %s "$out/stream.wav") vs $(stat -c %s "$out/grpc.wav") bytes"

sdk whole
[ "$(cat "$out/whole.txt")" = "$(cat "$out/grpc.txt")" ] || fail "whole text differs"
same_pcm "$out/whole.wav" "$out/grpc.wav" || fail "whole audio differs"

# With --voice_stage=2 (the demo's vocoder) audio.voice speaks: the request's
# "alloy" is espeak-ng's variant f2 — the same PCM omni gets asking the
# vocoder for f2, and not the default voice's.
main_base="$base" main_pid="$gw_pid"
start_gateway voiced "$port" --voice_stage=2
voiced="$base" base="$main_base" gw_pid="$main_pid"
mkdir -p "$out/voiced"
"$NODE" "$SDK_DIR/sdk_test.mjs" "$voiced" "$out/voiced" stream >"$out/voiced.json" 2>"$out/voiced.log" ||
  fail "stream with a voice: $(cat "$out/voiced.json" "$out/voiced.log")"
"$omni" generate "$server" --prompt="Tell me about the sea." --modalities=text,audio \
  --max_tokens=0:24 --seed=0:7 --extra=2:voice=f2 --wav="$out/grpc-f2.wav" >/dev/null \
  2>"$out/grpc-f2.err" || fail "omni generate with voice f2: $(cat "$out/grpc-f2.err")"
same_pcm "$out/voiced/stream.wav" "$out/grpc-f2.wav" ||
  fail "the voiced stream is not the f2 voice's PCM"
! same_pcm "$out/voiced/stream.wav" "$out/grpc.wav" || fail "audio.voice changed nothing"
echo "sdk voice: alloy speaks as espeak-ng's f2 ($(stat -c %s "$out/voiced/stream.wav") bytes)"
# A voice that is none of OpenAI's names goes to the vocoder as it is: one the
# vocoder does not know is a 400 naming audio.voice before anything is
# answered, streamed or not; one it knows (espeak-ng's croak) streams.
voice_chat() {
  curl -s -o "$out/$1" -w '%{http_code}' "$voiced/v1/chat/completions" \
    -H "Authorization: Bearer $token" -d '{"model": "omni-demo", "messages": [{"role": "user",
    "content": "Hi"}], "modalities": ["text", "audio"], "max_tokens": 8, "audio": {"voice":
    "'"$2"'", "format": "wav"}, "stream": '"$3"'}'
}
for stream in true false; do
  code=$(voice_chat "badvoice-$stream.json" nosuchvoice "$stream")
  [ "$code" = 400 ] || fail "unknown voice, stream $stream: HTTP $code: $(head -c 300 "$out/badvoice-$stream.json")"
  grep -q '"param":"audio.voice"' "$out/badvoice-$stream.json" ||
    fail "unknown voice, stream $stream: $(cat "$out/badvoice-$stream.json")"
done
code=$(voice_chat croak.sse croak true)
[ "$code" = 200 ] || fail "voice croak: HTTP $code: $(head -c 300 "$out/croak.sse")"
grep -q '"audio":{' "$out/croak.sse" && grep -q '"content":' "$out/croak.sse" &&
  grep -q '^data: \[DONE\]' "$out/croak.sse" || fail "voice croak: $(head -c 600 "$out/croak.sse")"
echo "sdk voice: an unknown voice is a 400 before the stream, croak streams"

sdk errors

sdk disconnect
wait_idle "the disconnect"

OMNISTAGE_TOKEN="$slow" sdk rate_limited

sdk concurrent
# (Read whole, then searched: `curl | grep -q` under pipefail fails when grep
# stops reading before curl's last write.)
grep -q 'omnistage_gateway_chat_completions_in_flight 0' <<<"$(curl -s "$base/metrics")" ||
  fail "the gateway still counts streams in flight: $(curl -s "$base/metrics")"
grep -q '^omnistage_heap_bytes{state="allocated"} [1-9]' <<<"$(curl -s "$base/metrics")" ||
  fail "the gateway does not report its heap: $(curl -s "$base/metrics" | grep heap)"

# SIGTERM drains: the running stream ends whole, new clients are turned away,
# the gateway exits 0.
curl -sN "$base/v1/chat/completions" -H "Authorization: Bearer $token" -d '{"model":
  "omni-demo", "messages": [{"role": "user", "content": "Drain"}], "modalities": ["text",
  "audio"], "stream": true}' >"$out/drain.sse" &
curl_pid=$!
for _ in $(seq 1 100); do
  [ -s "$out/drain.sse" ] && break
  sleep 0.05
done
[ -s "$out/drain.sse" ] || fail "the stream to drain never began"
kill -TERM "$gw_pid"
sleep 0.2
code=$(curl -s -o /dev/null -w '%{http_code}' "$base/health" || true)
[ "$code" = 503 ] || [ "$code" = 000 ] || fail "a new client during the drain got HTTP $code"
wait "$curl_pid" || fail "the draining stream's client failed"
tail -c 200 "$out/drain.sse" | grep -q 'data: \[DONE\]' || fail "the draining stream was cut: $(tail -c 300 "$out/drain.sse")"
wait "$gw_pid" || fail "the gateway exited $? after the drain"
grep -q 'draining: 1 chat completion' "$out/gw.err" || fail "no drain line in the log: $(cat "$out/gw.err")"

# An orchestrator that admits one request in flight: the second is 429; then,
# with that orchestrator gone, 503.
cat >"$out/one.yaml" <<YAML
name: omni-demo
limits: {max_in_flight: 1}
stages:
  - name: thinker
    engine: thinker
    engine_params: {batch_size: 4, step_time_us: 2000}
    replicas: 1
    final_output: true
    output_modality: text
    defaults: {extra: {sentences: 100}}
YAML
orchestrator/orchestrator --config="$out/one.yaml" --listen=127.0.0.1:0 \
  --stage_worker=stage_worker/stage_worker --tokens_file="$out/tokens.yaml" \
  >"$out/one.out" 2>"$out/one.err" &
one_pid=$!
pids="$pids $one_pid"
one_port=$(listened_port one) || exit 1
start_gateway limited "$one_port"
sdk limited
kill -KILL "$one_pid"
wait "$one_pid" 2>/dev/null || true
sdk unavailable
echo PASS
