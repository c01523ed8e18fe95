#!/usr/bin/env bash
# The gateway passes a client's Authorization header on to the orchestrator as
# gRPC metadata, which cannot carry every byte an HTTP header can. As real
# processes on loopback, with bearer tokens on:
# - a token with whitespace around it is served;
# - a token with a control character inside is a 401 that says so and shows no
#   part of it (in the answer or the gateway's log), and the gateway serves on;
# - a traceparent with a control character is ignored, as a malformed one is;
# - X-Session-Id reaches the request (its session key): one longer than 256
#   bytes is a 400 naming the header.
# Stops what it starts, by PID.
set -euo pipefail
source orchestrator/testing/orchestrator_process.sh

token="gateway-authorization-test-$RANDOM$RANDOM$RANDOM"
cat >"$out/tokens.yaml" <<YAML
tokens:
  - identity: app
    role: user
    token: "$token"
YAML
thinker_pipeline "$out/thinker.yaml"
start_orchestrator "$out/thinker.yaml" --tokens_file="$out/tokens.yaml"
gateway/gateway --orchestrator="127.0.0.1:$port" --listen=127.0.0.1:0 \
  >"$out/gw.out" 2>"$out/gw.err" &
gw_pid=$!
trap 'kill -KILL $pid $gw_pid 2>/dev/null; wait $pid $gw_pid 2>/dev/null || true' EXIT
base="http://127.0.0.1:$(listened_port gw)"
wait_healthy "$base"

# complete NAME HEADER...: a chat completion with the headers; prints the
# HTTP status, the body goes to $out/NAME.json.
complete() {
  local name="$1"
  shift
  local headers=()
  for h in "$@"; do headers+=(-H "$h"); done
  curl -s -o "$out/$name.json" -w '%{http_code}' "${headers[@]}" "$base/v1/chat/completions" \
    -d '{"model": "omni-demo", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 3}'
}

code=$(complete spaces "Authorization: Bearer   $token 	 ")
[ "$code" = 200 ] || fail "a token with whitespace around it: HTTP $code: $(cat "$out/spaces.json")"
code=$(complete none)
[ "$code" = 401 ] || fail "no token: HTTP $code: $(cat "$out/none.json")"

broken="${token:0:12}$(printf '\001')${token:12}"
code=$(complete control "Authorization: Bearer $broken")
[ "$code" = 401 ] || fail "a control character in the token: HTTP $code: $(cat "$out/control.json")"
grep -q '"message":"the Authorization header: the bearer token holds a control character (character 13)' \
  "$out/control.json" || fail "not why: $(cat "$out/control.json")"
grep -q '"type":"authentication_error"' "$out/control.json" || fail "$(cat "$out/control.json")"
kill -0 "$gw_pid" 2>/dev/null || fail "the gateway died: $(cat "$out/gw.err")"
for i in 0 8 16 24 32 40; do
  [ "${#token}" -ge $((i + 8)) ] || break
  ! grep -qF -- "${token:$i:8}" "$out/control.json" "$out/gw.err" "$out/gw.out" ||
    fail "a piece of the token was shown: $(cat "$out/control.json" "$out/gw.err")"
done

for trace in "00-0af7651916cd43dd8448eb211c80319c$(printf '\001')-b7ad6b7169203331-01" \
  "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-$(printf '\002')"; do
  code=$(complete trace "Authorization: Bearer $token" "traceparent: $trace")
  [ "$code" = 200 ] || fail "a traceparent with a control character: HTTP $code: $(cat "$out/trace.json")"
done
code=$(complete session "Authorization: Bearer $token" "X-Session-Id: conversation-7")
[ "$code" = 200 ] || fail "a session id: HTTP $code: $(cat "$out/session.json")"
code=$(complete long_session "Authorization: Bearer $token" "X-Session-Id: $(printf 'k%.0s' {1..257})")
[ "$code" = 400 ] || fail "a session id of 257 bytes: HTTP $code: $(cat "$out/long_session.json")"
grep -q '"param":"X-Session-Id"' "$out/long_session.json" ||
  fail "the 400 does not name the header: $(cat "$out/long_session.json")"
code=$(complete after "Authorization: Bearer $token")
[ "$code" = 200 ] || fail "after the refusals: HTTP $code: $(cat "$out/after.json")"
echo PASS
