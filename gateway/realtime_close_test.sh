#!/usr/bin/env bash
# How Realtime connections end and are refused, as real processes on loopback
# (a one-stage text pipeline at 20 ms a word, plain HTTP, no tokens), with
# `ws` clients (sdk_test/realtime_close.mjs) that see the close codes:
# - --max_realtime_sessions=2: the third is refused with 503 too_many_sessions
#   before the upgrade, and admitted once another closed;
# - --realtime_ping_interval_ms / --realtime_idle_timeout_ms: a client that
#   answers no ping is closed with 1001 "idle timeout", one that does is not;
# - SIGTERM: an idle session is closed with 1001 at once, one with a running
#   response once it ended (its response.done first); the drain's log line
#   counts the chat completion and the realtime response apart; past
#   --drain_timeout_ms the response is cancelled before the close.
# Stops what it starts, by PID.
set -euo pipefail
source gateway/sdk_test/setup.sh
sdk_setup gateway/sdk_test/realtime_close.mjs ws
thinker_pipeline "$out/slow.yaml" "batch_size: 8, step_time_us: 20000, sentences: 100"
start_orchestrator "$out/slow.yaml"
pids="$pid"
trap 'kill -KILL $pids 2>/dev/null; wait $pids 2>/dev/null || true' EXIT

# close_check CHECK [GATEWAY_PID]: against the gateway started last.
close_check() {
  "$NODE" "$SDK_DIR/realtime_close.mjs" "http://127.0.0.1:$gw_port" "$@" \
    >"$out/$1.json" 2>"$out/$1.err" ||
    fail "$1: $(cat "$out/$1.json" "$out/$1.err")"
  echo "realtime $1: $(cat "$out/$1.json")"
}

# exits_cleanly NAME: the gateway $gw ended with 0 (after a SIGTERM).
exits_cleanly() {
  local rc=0
  wait "$gw" || rc=$?
  [ "$rc" -eq 0 ] || fail "$1 exited $rc: $(tail -n 5 "$out/$1.err")"
}

start_gateway limits --max_realtime_sessions=2 --realtime_ping_interval_ms=100 \
  --realtime_idle_timeout_ms=500
close_check limit
close_check idle

# A chat completion streams (1.2 s of words) while the response runs.
start_gateway drain
curl -sN "http://127.0.0.1:$gw_port/v1/chat/completions" -d '{"model": "omni-demo", "stream": true,
  "max_tokens": 60, "messages": [{"role": "user", "content": "Hi"}]}' >"$out/chat.txt" &
chat=$!
pids="$pids $chat"
for _ in $(seq 1 100); do
  grep -q 'data:' "$out/chat.txt" && break
  sleep 0.05
done
close_check drain "$gw"
exits_cleanly drain
wait "$chat" || fail "the chat completion failed in the drain"
grep -q 'data: \[DONE\]' "$out/chat.txt" || fail "the chat completion did not finish: $(tail -c 300 "$out/chat.txt")"
grep -aq 'draining: 1 chat completion(s) and 1 realtime response(s)' "$out/drain.err" ||
  fail "drain line: $(grep -a draining "$out/drain.err")"

start_gateway deadline --drain_timeout_ms=300
close_check deadline "$gw"
exits_cleanly deadline
grep -aq 'stopping with 0 chat completion(s) and 1 realtime response(s) still running' \
  "$out/deadline.err" || fail "deadline line: $(grep -ai stopping "$out/deadline.err")"
echo PASS
