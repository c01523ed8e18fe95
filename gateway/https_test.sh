#!/usr/bin/env bash
# The gateway serving HTTPS (--tls_cert/--tls_key, certificates from
# deploy/certs/make_dev_certs.sh), as real processes on loopback:
# - curl, checking the certificate against the CA: /v1/models, a streamed
#   completion to [DONE];
# - the official OpenAI SDK (node, the CA given by NODE_EXTRA_CA_CERTS)
#   streams text and audio from the demo pipeline;
# - plain HTTP to the HTTPS port gets no HTTP answer;
# - a certificate rotated in place is served to new connections within
#   seconds, without a restart; a rotation that leaves a broken pair is logged
#   and the previous certificate served on;
# - refused at start: --tls_cert without --tls_key, a key that is not the
#   certificate's.
# Stops what it starts, by PID.
set -euo pipefail
source orchestrator/testing/orchestrator_process.sh
SDK_DIR="$(dirname "$(readlink -f gateway/sdk_test/chat.mjs)")"
NODE="${NODE:-node}"
command -v "$NODE" >/dev/null || fail "node not found (set NODE=/path/to/node)"
[ -d "$SDK_DIR/node_modules/openai" ] ||
  fail "$SDK_DIR/node_modules/openai is missing: run ./setup.sh at the repository root"

deploy/certs/make_dev_certs.sh "$out/certs" >/dev/null
deploy/certs/make_dev_certs.sh "$out/next" >/dev/null  # another CA's: the rotation
certs="$out/certs"
mkdir -p "$out/served"
cp "$certs/gateway.crt" "$certs/gateway.key" "$out/served/"

start_orchestrator pipelines/local_omni.yaml
pids="$pid"
trap 'kill -KILL $pids 2>/dev/null; wait $pids 2>/dev/null || true' EXIT

gateway/gateway --orchestrator="127.0.0.1:$port" --listen=127.0.0.1:0 \
  --tls_cert="$out/served/gateway.crt" --tls_key="$out/served/gateway.key" \
  >"$out/gw.out" 2>"$out/gw.err" &
pids="$pids $!"
gw_port=$(listened_port gw) || exit 1
base="https://127.0.0.1:$gw_port"
https() { curl -s --cacert "$certs/ca.crt" "$@"; }
wait_healthy "$base" --cacert "$certs/ca.crt"
https -f "$base/health" >/dev/null || fail "not healthy over HTTPS: $(https "$base/health" 2>&1)"
grep -q "serving model 'omni-demo' on https://127.0.0.1:$gw_port" "$out/gw.err" ||
  fail "no https serving line: $(cat "$out/gw.err")"

grep -q '"id":"omni-demo"' <<<"$(https -f "$base/v1/models")" || fail "GET /v1/models over HTTPS"
https -N "$base/v1/chat/completions" -d '{"model": "omni-demo", "messages": [{"role": "user",
  "content": "Hello"}], "max_tokens": 8, "stream": true}' >"$out/stream.sse"
tail -c 20 "$out/stream.sse" | grep -q 'data: \[DONE\]' || fail "no [DONE]: $(tail -c 300 "$out/stream.sse")"
grep -q '"content":' "$out/stream.sse" || fail "no text streamed: $(head -c 300 "$out/stream.sse")"
echo "curl: /v1/models and a streamed completion over HTTPS"

NODE_EXTRA_CA_CERTS="$certs/ca.crt" "$NODE" "$SDK_DIR/chat.mjs" --base="$base" \
  --wav="$out/sdk.wav" "Tell me about the sea." >"$out/sdk.txt" 2>"$out/sdk.err" ||
  fail "the SDK over HTTPS: $(cat "$out/sdk.txt" "$out/sdk.err")"
[ -s "$out/sdk.txt" ] || fail "the SDK got no text"
[ "$(stat -c %s "$out/sdk.wav")" -gt 44 ] || fail "the SDK got no audio"
echo "sdk: $(head -c 60 "$out/sdk.txt")... and $(stat -c %s "$out/sdk.wav") bytes of WAV"

# Plain HTTP to the HTTPS port: no HTTP answer (curl fails, or reads no status).
code=$(curl -s -m 5 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$gw_port/v1/models" || true)
[ "$code" = 000 ] || fail "plain HTTP to the HTTPS port got HTTP $code"

# fingerprint: the SHA-256 fingerprint of the certificate the gateway serves to
# a new connection.
fingerprint() {
  openssl s_client -connect "127.0.0.1:$gw_port" </dev/null 2>/dev/null |
    openssl x509 -noout -fingerprint -sha256
}
file_fingerprint() { openssl x509 -noout -fingerprint -sha256 -in "$1"; }
[ "$(fingerprint)" = "$(file_fingerprint "$certs/gateway.crt")" ] || fail "not serving gateway.crt"

# Rotation as a Secret update does it: new files renamed into place.
cp "$out/next/gateway.crt" "$out/served/gateway.crt.new"
cp "$out/next/gateway.key" "$out/served/gateway.key.new"
mv "$out/served/gateway.key.new" "$out/served/gateway.key"
mv "$out/served/gateway.crt.new" "$out/served/gateway.crt"
want="$(file_fingerprint "$out/next/gateway.crt")"
for _ in $(seq 1 50); do
  [ "$(fingerprint)" = "$want" ] && break
  sleep 0.2
done
[ "$(fingerprint)" = "$want" ] || fail "the rotated certificate is not served: $(cat "$out/gw.err")"
curl -sf --cacert "$out/next/ca.crt" "$base/v1/models" >/dev/null ||
  fail "a client of the new CA cannot connect after the rotation"
grep -q 'serving the TLS certificate re-read from' "$out/gw.err" || fail "no reload line in the log"
echo "rotation: the new certificate is served without a restart"

# A broken rotation (a key that is not the certificate's): logged, and the
# previous pair goes on.
cp "$certs/gateway.key" "$out/served/gateway.key.new"
mv "$out/served/gateway.key.new" "$out/served/gateway.key"
for _ in $(seq 1 50); do
  grep -q 'the TLS certificate changed but does not load' "$out/gw.err" && break
  curl -s --cacert "$out/next/ca.crt" -o /dev/null "$base/v1/models" || true  # a new connection looks
  sleep 0.2
done
grep -q 'the TLS certificate changed but does not load' "$out/gw.err" ||
  fail "no warning for the broken pair: $(cat "$out/gw.err")"
[ "$(fingerprint)" = "$want" ] || fail "after a broken rotation the previous certificate is not served"
curl -sf --cacert "$out/next/ca.crt" "$base/v1/models" >/dev/null || fail "not serving after a broken rotation"
echo "broken rotation: logged, the previous certificate served on"

# Refused at start, with a reason.
rc=0
gateway/gateway --orchestrator="127.0.0.1:$port" --listen=127.0.0.1:0 \
  --tls_cert="$certs/gateway.crt" >"$out/half.out" 2>"$out/half.err" || rc=$?
[ "$rc" = 2 ] && grep -q -- '--tls_cert and --tls_key go together' "$out/half.err" ||
  fail "--tls_cert alone: exit $rc: $(cat "$out/half.err")"
rc=0
gateway/gateway --orchestrator="127.0.0.1:$port" --listen=127.0.0.1:0 \
  --tls_cert="$certs/gateway.crt" --tls_key="$out/next/gateway.key" >"$out/bad.out" 2>"$out/bad.err" || rc=$?
[ "$rc" = 2 ] && grep -q -- "is not the key of --tls_cert=" "$out/bad.err" ||
  fail "a key that is not the certificate's: exit $rc: $(cat "$out/bad.err")"
echo PASS
