#!/usr/bin/env bash
# ./demo.sh --serve: on a port another process holds it stops at once with the
# orchestrator's own message and a non-zero exit; on free ports it starts
# without a warning, serves gRPC and the OpenAI API, and Ctrl-C stops
# everything it started.
set -euo pipefail
source tests/demo_serve.sh

# A port held by another process.
/usr/bin/python3 -c '
import socket, sys, time
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen()
print(s.getsockname()[1], flush=True)
time.sleep(120)' >"$out/holder.port" &
holder=$!
trap 'kill $holder 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do [ -s "$out/holder.port" ] && break; sleep 0.1; done
taken=$(cat "$out/holder.port")
[ -n "$taken" ] || fail "no port held"
rc=0
SECONDS=0
OMNISTAGE_DEMO_BIN=. timeout 60 ./demo.sh --serve "$taken" >/dev/null 2>"$out/taken.err" || rc=$?
[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || fail "a taken port: exit code $rc: $(cat "$out/taken.err")"
[ "$SECONDS" -le 30 ] || fail "a taken port took ${SECONDS}s to stop the demo"
grep -q "orchestrator: cannot listen on 127.0.0.1:$taken (--listen): Address already in use" \
  "$out/taken.err" || fail "no orchestrator message: $(cat "$out/taken.err")"
grep -q '^demo: the orchestrator did not start (exit code [1-9]' "$out/taken.err" ||
  fail "the demo's message: $(cat "$out/taken.err")"
grep -q 'demo: serving' "$out/taken.err" && fail "it said it serves: $(cat "$out/taken.err")"
grep -q ' warning gateway' "$out/taken.err" && fail "a gateway started: $(cat "$out/taken.err")"
kill "$holder"
trap - EXIT

# A clean start: not one warning, and both APIs answer.
start_demo 0
if grep -E '^[0-9TZ:.-]+ (warning|error) ' "$out/demo.err"; then fail "warnings at start (above)"; fi
client/omni generate --server="127.0.0.1:$grpc_port" --prompt=Hi --modalities=text \
  --extra=0:sentences=1 >"$out/text" 2>"$out/generate.err" ||
  fail "generate: $(cat "$out/generate.err")"
grep -q '[A-Za-z]' "$out/text" || fail "no text"
curl -sf "http://127.0.0.1:$gateway_port/v1/chat/completions" \
  -d '{"model": "omni-demo", "messages": [{"role": "user", "content": "Hi"}]}' >"$out/chat" ||
  fail "chat completion"
grep -q '"finish_reason":"stop"' "$out/chat" || fail "chat: $(cat "$out/chat")"
orchestrator_pid=$(pgrep -P "$demo" -f orchestrator/orchestrator | head -1 || true)
stop_demo
if grep -E '^[0-9TZ:.-]+ (warning|error) ' "$out/demo.err"; then fail "warnings (above)"; fi
grep -q 'SIGTERM received' "$out/demo.err" && fail "a service was signalled twice: $(cat "$out/demo.err")"
# Nothing it started is left: the ports are free and no worker of its orchestrator runs.
curl -s "http://127.0.0.1:$gateway_port/health" >/dev/null && fail "the gateway still answers"
if [ -n "$orchestrator_pid" ] && pgrep -f "instance_id=[a-z]*-[0-9]*-$orchestrator_pid-" >/dev/null; then
  fail "stage workers were left behind: $(pgrep -af "instance_id=[a-z]*-[0-9]*-$orchestrator_pid-")"
fi
echo "PASS"
