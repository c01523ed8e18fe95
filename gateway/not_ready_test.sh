#!/usr/bin/env bash
# The gateway in front of an orchestrator that is not ready (a stage without a
# live replica), as real processes on loopback. Its channel sends calls only to
# ready orchestrators, and a call that finds none is made once more without
# that condition, so:
# - GET /health is 503 (no ready orchestrator), yet a text-only completion,
#   which needs only the live first stage, is answered 200;
# - with the first stage dead, a completion is a 503 that carries the
#   orchestrator's own reason ("stage 0 (thinker) has no live replica").
# Stops what it starts, by PID.
set -euo pipefail
source orchestrator/testing/orchestrator_process.sh

# pipeline FILE THINKER_LINE: a thinker and a talker whose replica never
# answers (ports 1 and 2 on loopback: nothing listens there).
pipeline() {
  cat >"$1" <<YAML
name: omni-demo
stages:
  - name: thinker
$2
    final_output: true
    output_modality: text
  - name: talker
    addresses: ["127.0.0.1:1"]
    final_output: true
    output_modality: tokens
YAML
}
pipeline "$out/degraded.yaml" '    engine: thinker
    engine_params: {batch_size: 8, step_time_us: 1000}
    replicas: 1'
pipeline "$out/dead.yaml" '    addresses: ["127.0.0.1:2"]'

pids=""
trap 'kill -KILL $pids 2>/dev/null; wait $pids 2>/dev/null || true' EXIT
# serve NAME CONFIG: an orchestrator with CONFIG and a gateway in front of it;
# sets $base to the gateway's address.
serve() {
  orchestrator/orchestrator --config="$2" --listen=127.0.0.1:0 \
    --stage_worker=stage_worker/stage_worker >"$out/$1-orch.out" 2>"$out/$1-orch.err" &
  pids="$pids $!"
  local port
  port=$(listened_port "$1-orch") || exit 1
  gateway/gateway --orchestrator="127.0.0.1:$port" --listen=127.0.0.1:0 \
    >"$out/$1-gw.out" 2>"$out/$1-gw.err" &
  pids="$pids $!"
  base="http://127.0.0.1:$(listened_port "$1-gw")"
}
complete() {
  curl -s -o "$out/$1.json" -w '%{http_code}' "$base/v1/chat/completions" -d '{"model":
    "omni-demo", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4}'
}

serve degraded "$out/degraded.yaml"
# Served once the thinker's replica is up (the talker's never is).
for _ in $(seq 1 100); do
  [ "$(complete degraded)" = 200 ] && break
  sleep 0.1
done
[ "$(complete degraded)" = 200 ] || fail "a text-only completion: $(cat "$out/degraded.json")"
grep -q '"content":"' "$out/degraded.json" || fail "no text: $(cat "$out/degraded.json")"
code=$(curl -s -o "$out/health.json" -w '%{http_code}' "$base/health")
[ "$code" = 503 ] || fail "/health with no ready orchestrator answered $code: $(cat "$out/health.json")"
grep -q '"reason":"no orchestrator is ready: each answers NOT_SERVING' "$out/health.json" ||
  fail "/health does not say why: $(cat "$out/health.json")"
curl -s "$base/metrics" | grep -Eq '^omnistage_gateway_unready_fallbacks_total\{target="orchestrator"\} [1-9]' ||
  fail "the fallback is not counted: $(curl -s "$base/metrics" | grep fallback)"
echo "degraded: /health 503, a text-only completion 200"

serve dead "$out/dead.yaml"
code=$(complete dead)
[ "$code" = 503 ] || fail "with the first stage dead: HTTP $code: $(cat "$out/dead.json")"
grep -q '"message":"stage 0 (thinker) has no live replica"' "$out/dead.json" ||
  fail "not the orchestrator's reason: $(cat "$out/dead.json")"
echo "dead: 503 with the orchestrator's reason"
echo PASS
