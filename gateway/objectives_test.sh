#!/usr/bin/env bash
# A chat completion's latency objectives from its headers, as real processes
# on loopback: x-slo-ttft-ms, x-slo-tpot-ms and x-slo-criticality reach the
# orchestrator, which judges them as the request ends (its access line and
# metrics: met, and the goodput); once its predictor has learned the thinker,
# a sheddable request it predicts to miss is a 429 with Retry-After, at once;
# a header that is not a whole number of milliseconds in 1..600000, or an
# unknown criticality, is a 400 naming it; x-slo-ttfa-ms on a pipeline that
# makes no audio is the orchestrator's 400 naming the field. Stops what it
# starts, by PID.
set -euo pipefail
source orchestrator/testing/orchestrator_process.sh

thinker_pipeline "$out/thinker.yaml"
start_orchestrator "$out/thinker.yaml" --metrics_listen=127.0.0.1:0
metrics=$(metrics_url)
pids="$pid"
trap 'kill -KILL $pids 2>/dev/null; wait $pids 2>/dev/null || true' EXIT
start_gateway gw
base="http://127.0.0.1:$gw_port"

# complete NAME HEADER...: a chat completion with the headers; prints the
# HTTP status, the body goes to $out/NAME.json.
complete() {
  local name="$1"
  shift
  local headers=()
  for h in "$@"; do headers+=(-H "$h"); done
  curl -s -m 30 -o "$out/$name.json" -D "$out/$name.headers" -w '%{http_code}' "${headers[@]}" \
    "$base/v1/chat/completions" \
    -d '{"model": "omni-demo", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 3}'
}

code=$(complete timely "x-slo-ttft-ms: 60000")
[ "$code" = 200 ] || fail "with x-slo-ttft-ms: HTTP $code: $(cat "$out/timely.json")"
expect_idle "$metrics"
grep -q 'omnistage_latency_objectives_total{objective="first_output",outcome="met"} 1$' \
  "$out/metrics.txt" || fail "not judged met: $(grep objectives "$out/metrics.txt")"
grep -q '^omnistage_goodput_requests_total 1$' "$out/metrics.txt" ||
  fail "no goodput: $(grep goodput "$out/metrics.txt")"
grep -q 'access .*first_output_objective=met' "$out/orch.err" ||
  fail "the access line does not say it: $(grep access "$out/orch.err")"

code=$(complete paced "x-slo-ttft-ms: 60000" "x-slo-tpot-ms: 60000" "x-slo-criticality: sheddable")
[ "$code" = 200 ] || fail "with x-slo-tpot-ms: HTTP $code: $(cat "$out/paced.json")"
grep -q 'access .*between_outputs_objective=met criticality=sheddable' "$out/orch.err" ||
  fail "the access line does not judge the time between outputs: $(grep access "$out/orch.err")"

# Two more teach the predictor the thinker (it answers after three); then a
# sheddable request that asks for its first token within a millisecond is
# refused before it starts.
complete more1 >/dev/null
complete more2 >/dev/null
code=$(complete shed "x-slo-ttft-ms: 1" "x-slo-criticality: sheddable")
[ "$code" = 429 ] || fail "a sheddable request predicted to miss: HTTP $code: $(cat "$out/shed.json")"
grep -q 'predicted to miss this request' "$out/shed.json" ||
  fail "the 429 does not say why: $(cat "$out/shed.json")"
grep -qi '^retry-after: [0-9]' "$out/shed.headers" ||
  fail "the 429 has no Retry-After: $(cat "$out/shed.headers")"
# A standard one with the same objective is served, and counted late.
code=$(complete served "x-slo-ttft-ms: 1")
[ "$code" = 200 ] || fail "a standard request predicted to miss: HTTP $code: $(cat "$out/served.json")"
expect_idle "$metrics"
grep -q 'omnistage_admission_refusals_total{reason="predicted_miss"} 1$' "$out/metrics.txt" ||
  fail "the shed is not counted: $(grep refusals "$out/metrics.txt")"
grep -q 'omnistage_objective_misses_total{objective="first_output",reason="predicted"} 1$' \
  "$out/metrics.txt" || fail "the late one is not counted: $(grep misses "$out/metrics.txt")"

code=$(complete odd "x-slo-criticality: urgent")
[ "$code" = 400 ] || fail "x-slo-criticality: urgent: HTTP $code: $(cat "$out/odd.json")"
grep -q '"param":"x-slo-criticality"' "$out/odd.json" ||
  fail "the 400 does not name the header: $(cat "$out/odd.json")"

for value in 0 abc 1.5 600001; do
  code=$(complete bad "x-slo-ttft-ms: $value")
  [ "$code" = 400 ] || fail "x-slo-ttft-ms: $value: HTTP $code: $(cat "$out/bad.json")"
  grep -q '"param":"x-slo-ttft-ms"' "$out/bad.json" ||
    fail "the 400 for '$value' does not name the header: $(cat "$out/bad.json")"
done

code=$(complete mute "x-slo-ttfa-ms: 500")
[ "$code" = 400 ] || fail "x-slo-ttfa-ms without audio: HTTP $code: $(cat "$out/mute.json")"
grep -q 'objectives.first_audio_ms: the request gets no audio' "$out/mute.json" ||
  fail "the 400 does not say why: $(cat "$out/mute.json")"
echo "PASS"
