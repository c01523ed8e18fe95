#!/usr/bin/env bash
# A full admission queue through the gateway, as real processes on loopback: an
# orchestrator whose only stage takes one request at a time (batch size 1, no
# headroom) and whose queue holds one more. While one completion streams and a
# second waits in the queue, a third is refused at once: HTTP 429, an OpenAI
# rate_limit_error body, and the orchestrator's retry hint as Retry-After (whole
# seconds, rounded up) and retry-after-ms. The two others end whole, and the
# orchestrator counts the refusal as reason "full".
# Stops what it starts, by PID.
set -euo pipefail
source orchestrator/testing/orchestrator_process.sh

cat >"$out/queue.yaml" <<YAML
name: omni-demo
limits: {max_queued: 1, admission_headroom: 0}
stages:
  - name: thinker
    engine: thinker
    engine_params: {batch_size: 1, step_time_us: 2000}
    replicas: 1
    final_output: true
    output_modality: text
    defaults: {extra: {sentences: 100}}
YAML
start_orchestrator "$out/queue.yaml" --metrics_listen=127.0.0.1:0
metrics=$(metrics_url)
pids="$pid"
trap 'kill -KILL $pids 2>/dev/null; wait $pids 2>/dev/null || true' EXIT
start_gateway gw
base="http://127.0.0.1:$gw_port"

# complete NAME MAX_TOKENS [CURL_FLAGS...]: a streamed completion; the body in
# $out/NAME.sse, the headers in $out/NAME.headers, the HTTP status on stdout.
complete() {
  local name="$1" max_tokens="$2"
  shift 2
  curl -sN "$@" -D "$out/$name.headers" -o "$out/$name.sse" -w '%{http_code}' \
    "$base/v1/chat/completions" -d "{\"model\": \"omni-demo\", \"stream\": true,
    \"max_tokens\": $max_tokens, \"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}]}"
}
# metric LINE_PREFIX: the value of the orchestrator's first metric line starting so.
metric() { curl -s "$metrics" | grep -F "$1" | head -n 1 | awk '{print $NF}'; }
# wait_for DESCRIPTION COMMAND...: until COMMAND succeeds (up to 30 s).
wait_for() {
  local what="$1"
  shift
  for _ in $(seq 1 300); do
    "$@" && return 0
    sleep 0.1
  done
  fail "no $what within 30 s"
}

# The first streams (about a second: 400 tokens, 2 ms a step); the second waits.
complete running 400 >"$out/running.code" &
running_pid=$!
pids="$pids $running_pid"
wait_for "first output of the running completion" grep -qs '"content"' "$out/running.sse"
complete queued 8 >"$out/queued.code" &
queued_pid=$!
pids="$pids $queued_pid"
queued_now() { [ "$(metric 'omnistage_admission_queued_requests{priority="0"}')" = 1 ]; }
wait_for "request waiting in the admission queue" queued_now

code=$(complete refused 8)
[ "$code" = 429 ] || fail "a completion past the full queue got HTTP $code: $(cat "$out/refused.sse")"
grep -q '"type":"rate_limit_error"' "$out/refused.sse" ||
  fail "not an OpenAI rate_limit_error: $(cat "$out/refused.sse")"
grep -q '"code":"rate_limit_exceeded"' "$out/refused.sse" ||
  fail "no rate_limit_exceeded code: $(cat "$out/refused.sse")"
retry_s=$(tr -d '\r' <"$out/refused.headers" | sed -n 's/^[Rr]etry-[Aa]fter: \([0-9]*\)$/\1/p')
retry_ms=$(tr -d '\r' <"$out/refused.headers" | sed -n 's/^retry-after-ms: \([0-9]*\)$/\1/p')
[ -n "$retry_s" ] && [ -n "$retry_ms" ] ||
  fail "the 429 carries no retry hint: $(cat "$out/refused.headers")"
[ "$retry_ms" -gt 0 ] || fail "retry-after-ms is $retry_ms"
[ "$retry_s" -eq $(((retry_ms + 999) / 1000)) ] ||
  fail "Retry-After $retry_s s is not retry-after-ms $retry_ms rounded up"
[ "$(metric 'omnistage_admission_refusals_total{reason="full"}')" = 1 ] ||
  fail "the refusal is not counted as full: $(curl -s "$metrics" | grep refusals)"
echo "refused: HTTP 429, Retry-After $retry_s s, retry-after-ms $retry_ms"

# The running and the queued completions end whole.
for name in running queued; do
  wait "$(eval echo "\$${name}_pid")" || fail "the $name completion's client failed"
  [ "$(cat "$out/$name.code")" = 200 ] || fail "the $name completion got HTTP $(cat "$out/$name.code")"
  tail -c 200 "$out/$name.sse" | grep -q 'data: \[DONE\]' ||
    fail "the $name completion did not end whole: $(tail -c 300 "$out/$name.sse")"
done
echo "the running and the queued completions ended whole"
echo PASS
