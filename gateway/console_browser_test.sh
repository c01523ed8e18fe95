#!/usr/bin/env bash
# The gateway's live console (docs/console.md) in headless Chromium, as real
# processes on loopback with bearer tokens on: thinker -> talker (two workers
# this test starts, so it can kill one) -> vocoder, the gateway in front.
# - /console/status without a token is 401, with a user's 403, with the
#   admin's the pipeline as JSON; the page's files are served, others 404;
# - in the browser (gateway/console_test/console_test.mjs): the page asks for
#   the token, then draws the running pipeline's stages; a prompt sent from the
#   page streams text and sets an <audio> element to a WAV with sound; that
#   request shows among the recent ones with its outcome; a talker worker
#   killed by PID turns dead on the page; a stage's scaling signal and the
#   orchestrator's recent requests, added to its answers on their way to the
#   page, are drawn too. Screenshots go to $TEST_UNDECLARED_OUTPUTS_DIR.
# Needs node, Debian's chromium and gateway/console_test/node_modules
# (./setup.sh). Stops what it starts, by PID.
set -euo pipefail
source gateway/sdk_test/setup.sh
sdk_setup gateway/console_test/console_test.mjs playwright-core
CHROMIUM="${CHROMIUM:-/usr/bin/chromium}"
[ -x "$CHROMIUM" ] || fail "$CHROMIUM is missing: run ./setup.sh at the repository root"
shots="${TEST_UNDECLARED_OUTPUTS_DIR:-$out}"

# Chromium's profile and its socket: a short path (a socket's is at most 108
# bytes, and $TEST_TMPDIR's is longer).
browser_tmp=$(mktemp -d /tmp/omnistage-console.XXXXXX)
pids=""
trap 'kill -KILL $pids 2>/dev/null; wait $pids 2>/dev/null || true; rm -rf "$browser_tmp"' EXIT
# The talker's two replicas, started here (the orchestrator would restart a
# worker it spawned): their PIDs and ports.
talker_pids=()
talker_ports=()
for i in 0 1; do
  stage_worker/stage_worker --listen=127.0.0.1:0 --stage_id=1 --engine=talker \
    --engine_params=batch_size=64,step_time_us=1000,max_tokens=100000 \
    >"$out/talker$i.out" 2>"$out/talker$i.err" &
  talker_pids+=($!)
  pids="$pids $!"
done
for i in 0 1; do talker_ports+=("$(listened_port "talker$i")"); done

cat >"$out/pipeline.yaml" <<YAML
name: omni-demo
stages:
  - name: thinker
    engine: thinker
    engine_params: {batch_size: 64, step_time_us: 2000}
    replicas: 1
    final_output: true
    output_modality: text
    defaults: {max_tokens: 24}
  - name: talker
    engine: talker
    addresses: ["127.0.0.1:${talker_ports[0]}", "127.0.0.1:${talker_ports[1]}"]
    output_modality: tokens
    input_mode: streaming
  - name: vocoder
    engine: vocoder
    engine_params: {batch_size: 64, step_time_us: 1000, max_tokens: 100000}
    replicas: 1
    final_output: true
    output_modality: audio
    input_mode: streaming
YAML
write_tokens "$out/tokens.yaml" console-test
orchestrator/orchestrator --config="$out/pipeline.yaml" --listen=127.0.0.1:0 \
  --stage_worker=stage_worker/stage_worker --tokens_file="$out/tokens.yaml" \
  >"$out/orch.out" 2>"$out/orch.err" &
pids="$pids $!"
port=$(listened_port orch) || exit 1
start_gateway gw --voice_stage=2
base="http://127.0.0.1:$gw_port"

# status TOKEN: the HTTP status of GET /console/status with TOKEN ("" for
# none); the body goes to $out/status.json.
status() {
  local auth=()
  [ -z "$1" ] || auth=(-H "Authorization: Bearer $1")
  curl -s -o "$out/status.json" -w '%{http_code}' "${auth[@]}" "$base/console/status"
}
code=$(status "")
[ "$code" = 401 ] || fail "/console/status without a token: HTTP $code: $(cat "$out/status.json")"
grep -q '"type":"authentication_error"' "$out/status.json" || fail "$(cat "$out/status.json")"
code=$(status "$token")
[ "$code" = 403 ] || fail "/console/status with a user's token: HTTP $code: $(cat "$out/status.json")"
grep -q 'needs the admin role' "$out/status.json" || fail "not why: $(cat "$out/status.json")"
grep -q '"type":"permission_error"' "$out/status.json" || fail "$(cat "$out/status.json")"
code=$(status "not-a-token-anyone-has")
[ "$code" = 401 ] || fail "/console/status with an unknown token: HTTP $code"
code=$(status "$admin")
[ "$code" = 200 ] || fail "/console/status with the admin's token: HTTP $code: $(cat "$out/status.json")"
for stage in thinker talker vocoder; do
  grep -q "\"name\":\"$stage\"" "$out/status.json" || fail "no stage $stage: $(cat "$out/status.json")"
done
echo "/console/status: 401 without a token, 403 with a user's, 200 with the admin's"

headers=$(curl -s -D - -o "$out/page.html" "$base/console")
grep -q '^HTTP/1.1 200' <<<"$headers" || fail "/console: $headers"
grep -qi '^Content-Type: text/html' <<<"$headers" || fail "/console: $headers"
grep -qi "^Content-Security-Policy: default-src 'self'" <<<"$headers" || fail "/console: $headers"
grep -q '/console/console.js' "$out/page.html" || fail "the page does not load its script"
for file in console.js console.css pipeline_view.js prompt.js; do
  code=$(curl -s -o /dev/null -w '%{http_code}' "$base/console/$file")
  [ "$code" = 200 ] || fail "/console/$file: HTTP $code"
done
code=$(curl -s --path-as-is -o /dev/null -w '%{http_code}' "$base/console/../gateway")
[ "$code" = 404 ] || fail "/console/../gateway: HTTP $code"
code=$(curl -s -o /dev/null -w '%{http_code}' "$base/console/nothing.js")
[ "$code" = 404 ] || fail "/console/nothing.js: HTTP $code"

BASE="$base" ADMIN="$admin" KILL_PID="${talker_pids[1]}" KILL_REPLICA=1 CHROMIUM="$CHROMIUM" \
  SHOTS="$shots" TMPDIR="$browser_tmp" HOME="$browser_tmp" "$NODE" "$SDK_DIR/console_test.mjs" \
  >"$out/browser.json" 2>"$out/browser.err" ||
  fail "in the browser: $(cat "$out/browser.err") (screenshot in $shots)"
echo "browser: $(cat "$out/browser.json")"
[ -s "$shots/console.png" ] || fail "no screenshot"
kill -0 "$gw" 2>/dev/null || fail "the gateway died: $(tail -n 20 "$out/gw.err")"
echo PASS
