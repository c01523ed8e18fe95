#!/usr/bin/env bash
# omnistage's traces read by OpenTelemetry's own tools (docs/observability.md,
# "Traces"): a gateway, an orchestrator and two stage workers (real processes
# on loopback) export over OTLP/HTTP protobuf to a receiver that decodes with
# OpenTelemetry JS's generated definitions (otel_js/receiver.mjs); a client
# traced by the OpenTelemetry JS SDK (otel_js/client.mjs) sends chat
# completions under its own spans, and each request's trace is checked there:
# the client's span the parent of the gateway's, the gateway's of the
# orchestrator's Generate, its stage span the parent of the worker's engine
# span, tracestate kept throughout; a client that goes away, an abort and a
# failover (the request's worker killed) each in the trace as what it was; a
# Realtime session's response under its session's span, under the upgrade's.
# Needs node and tests/otel_js/node_modules (./setup.sh). Stops what it
# starts, by PID.
set -euo pipefail

source orchestrator/testing/orchestrator_process.sh
omni=client/omni
NODE="${NODE:-node}"
command -v "$NODE" >/dev/null || fail "node not found (set NODE=/path/to/node)"
# node finds node_modules next to the scripts' real files (runfiles are links).
js="$(dirname "$(readlink -f tests/otel_js/client.mjs)")"
[ -d "$js/node_modules/@opentelemetry/otlp-transformer" ] ||
  fail "$js/node_modules is missing: run ./setup.sh at the repository root"

pids=""
trap 'for p in $pids; do kill -KILL $p 2>/dev/null || true; wait $p 2>/dev/null || true; done' EXIT
# run NAME COMMAND...: COMMAND in the background, output in $out/NAME.out and
# .err; sets $last (its PID) and $port (of its "listening port=" line).
run() {
  local name="$1"
  shift
  : >"$out/$name.out"
  "$@" >"$out/$name.out" 2>"$out/$name.err" &
  last=$!
  pids="$pids $last"
  port=$(listened_port "$name") || exit 1
}

# Spans go out within 50 ms (every process reads the variable).
export OTEL_BSP_SCHEDULE_DELAY=50
run receiver "$NODE" "$js/receiver.mjs" "$out/spans.jsonl"
receiver="http://127.0.0.1:$port/v1/traces"
tracing=(--otlp_traces_endpoint="$receiver" --otlp_protocol=http/protobuf)

workers=""
addresses=""
for i in 1 2; do
  run "worker$i" stage_worker/stage_worker --engine=thinker --stage_id=0 \
    --engine_params=batch_size=8,step_time_us=2000 --listen=127.0.0.1:0 "${tracing[@]}"
  workers="$workers${workers:+,}$last@127.0.0.1:$port"
  addresses="$addresses${addresses:+, }\"127.0.0.1:$port\""
done
cat >"$out/pipeline.yaml" <<YAML
name: omni-demo
stages:
  - name: thinker
    addresses: [$addresses]
    final_output: true
    output_modality: text
    failover: {max_attempts: 2}
    defaults: {extra: {sentences: 100}}
YAML
run orchestrator orchestrator/orchestrator --config="$out/pipeline.yaml" --listen=127.0.0.1:0 \
  "${tracing[@]}"
orchestrator="127.0.0.1:$port"
run gateway gateway/gateway --orchestrator="$orchestrator" --listen=127.0.0.1:0 "${tracing[@]}"
gateway="http://127.0.0.1:$port"
wait_healthy "$gateway"

"$NODE" "$js/client.mjs" "$gateway" "$receiver" "$out/spans.jsonl" "$omni" "$orchestrator" \
  "$workers" >"$out/client.json" 2>"$out/client.err" ||
  fail "client.mjs: $(cat "$out/client.json" "$out/client.err")"
echo "client: $(cat "$out/client.json")"
[ ! -s "$out/receiver.err" ] || fail "receiver: $(cat "$out/receiver.err")"
echo "PASS"
