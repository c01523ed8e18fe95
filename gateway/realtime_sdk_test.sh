#!/usr/bin/env bash
# The Realtime API (/v1/realtime, WebSocket) through the gateway to the demo
# pipeline (thinker -> talker -> vocoder), with the official OpenAI SDK's
# Realtime client (npm `openai` and `ws`, unchanged, run with node), as real
# processes on loopback with bearer tokens on. The SDK dials wss:// only, so
# the gateway serves HTTPS (deploy/certs/make_dev_certs.sh); a second gateway
# serves plain HTTP for a ws:// client:
# - a text response streams output_text deltas equal to what the gRPC client
#   (omni generate) gets for the same prompt, max_tokens and seed;
# - an audio response: the transcript deltas are omni's text and the audio
#   deltas omni's PCM, byte for byte;
# - response.cancel mid-way ends it "cancelled", and the pipeline shows 0 in
#   flight after;
# - malformed events get Realtime-shaped errors and the session goes on;
# - 200 sessions at once, none lost;
# - an unknown token is refused (401) before the upgrade;
# - the same text over ws:// (plain HTTP);
# - docs/openai.md's example (sdk_test/realtime_hello.mjs) as written there.
# Stops what it starts, by PID.
set -euo pipefail
source gateway/sdk_test/setup.sh
sdk_setup gateway/sdk_test/realtime_test.mjs ws
write_tokens "$out/tokens.yaml" realtime-test
deploy/certs/make_dev_certs.sh "$out/certs" >/dev/null
start_orchestrator pipelines/local_omni.yaml --tokens_file="$out/tokens.yaml"
pids="$pid"
trap 'kill -KILL $pids 2>/dev/null; wait $pids 2>/dev/null || true' EXIT

gateway/gateway --orchestrator="127.0.0.1:$port" --listen=127.0.0.1:0 \
  --tls_cert="$out/certs/gateway.crt" --tls_key="$out/certs/gateway.key" \
  >"$out/gw.out" 2>"$out/gw.err" &
pids="$pids $!"
gw_port=$(listened_port gw) || exit 1
gateway/gateway --orchestrator="127.0.0.1:$port" --listen=127.0.0.1:0 \
  >"$out/plain.out" 2>"$out/plain.err" &
pids="$pids $!"
plain_port=$(listened_port plain) || exit 1
base="https://127.0.0.1:$gw_port"
wait_healthy "$base" --cacert "$out/certs/ca.crt"
wait_healthy "http://127.0.0.1:$plain_port"

rt() {  # rt CHECK [BASE]
  NODE_EXTRA_CA_CERTS="$out/certs/ca.crt" "$NODE" "$SDK_DIR/realtime_test.mjs" "${2:-$base}" \
    "$out" "$1" >"$out/$1.json" 2>"$out/$1.err" || fail "$1: $(cat "$out/$1.json" "$out/$1.err")"
  echo "realtime $1: $(cat "$out/$1.json")"
}

# The gRPC client's answer to the same request: the session's one user
# message is the prompt as it is; max_output_tokens 24 is the thinker's
# max_tokens; no seed on either side (the engines' default).
"$omni" generate "$server" --prompt="Tell me about the sea." --modalities=text,audio \
  --max_tokens=0:24 --wav="$out/grpc.wav" >"$out/grpc.txt" 2>"$out/grpc.err" ||
  fail "omni generate: $(cat "$out/grpc.err")"

# docs/openai.md's example, as written there.
NODE_EXTRA_CA_CERTS="$out/certs/ca.crt" "$NODE" "$SDK_DIR/realtime_hello.mjs" "$base" "$out/hello.pcm" \
  >"$out/hello.out" 2>"$out/hello.err" || fail "realtime_hello.mjs: $(cat "$out/hello.out" "$out/hello.err")"
grep -q '^completed: [0-9.]* s of audio in ' "$out/hello.out" || fail "realtime_hello.mjs: $(cat "$out/hello.out")"
[ -s "$out/hello.pcm" ] || fail "realtime_hello.mjs saved no audio"
echo "realtime_hello.mjs: $(tail -1 "$out/hello.out")"

rt text
[ "$(cat "$out/text.txt")" = "$(cat "$out/grpc.txt")" ] ||
  fail "text differs: '$(cat "$out/text.txt")' vs gRPC '$(cat "$out/grpc.txt")'"
rt audio
[ "$(cat "$out/audio.txt")" = "$(cat "$out/grpc.txt")" ] ||
  fail "transcript differs: '$(cat "$out/audio.txt")' vs gRPC '$(cat "$out/grpc.txt")'"
cmp -s "$out/audio.pcm" <(tail -c +45 "$out/grpc.wav") ||
  fail "audio differs: $(stat -c %s "$out/audio.pcm") bytes vs gRPC's $(($(stat -c %s "$out/grpc.wav") - 44))"
# The gateway timed that audio as it went out (and realtime_hello.mjs's before it).
heard=$(curl -s --cacert "$out/certs/ca.crt" "$base/metrics" |
  awk '$1 == "omnistage_gateway_audio_seconds_total{route=\"/v1/realtime\"}" {print $2}')
awk -v got="${heard:-0}" -v n="$(stat -c %s "$out/audio.pcm")" 'BEGIN {exit !(got >= n / 48000 - 0.01)}' ||
  fail "the gateway counts ${heard:-no} s of Realtime audio, the client got $(stat -c %s "$out/audio.pcm") bytes"

rt cancel
wait_idle "the cancel"

rt errors
rt unauthorized
rt plain "http://127.0.0.1:$plain_port"
[ "$(cat "$out/plain.txt")" = "$(cat "$out/grpc.txt")" ] || fail "ws:// text differs"

start=$(date +%s%N)
rt concurrent
echo "200 sessions in $(( ($(date +%s%N) - start) / 1000000 )) ms"
# Every session closed: the gateway holds none.
for _ in $(seq 1 50); do
  grep -q 'omnistage_gateway_realtime_sessions 0' <<<"$(curl -s --cacert "$out/certs/ca.crt" "$base/metrics")" && break
  sleep 0.1
done
grep -q 'omnistage_gateway_realtime_sessions 0' <<<"$(curl -s --cacert "$out/certs/ca.crt" "$base/metrics")" ||
  fail "sessions still counted open: $(curl -s --cacert "$out/certs/ca.crt" "$base/metrics" | grep realtime)"
echo PASS
