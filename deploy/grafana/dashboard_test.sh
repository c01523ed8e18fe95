#!/usr/bin/env bash
# The Grafana dashboard (omnistage.json) against real processes: every metric a
# panel or variable queries is in a real /metrics scrape of an orchestrator, a
# stage worker and the gateway after a few requests (with every label a
# selector names), and every query is PromQL a real Prometheus (Debian's
# package, on loopback, scraping them) evaluates. Stops what it starts, by PID.
set -euo pipefail
out="${TEST_TMPDIR:-$(mktemp -d)}"
fail() { echo "FAIL: $*"; exit 1; }
for tool in promtool prometheus; do
  command -v "$tool" >/dev/null || fail "$tool missing: run ./setup.sh (Debian package prometheus)"
done
dashboard=deploy/grafana/omnistage.json
omni=client/omni

pids=""
trap 'for p in $pids; do kill -KILL $p 2>/dev/null || true; wait $p 2>/dev/null || true; done' EXIT
# run NAME COMMAND...: COMMAND in the background, output in $out/NAME.out and
# .err; sets $port (of its "listening port=" line) and $metrics_port.
run() {
  local name="$1"
  shift
  "$@" >"$out/$name.out" 2>"$out/$name.err" &
  pids="$pids $!"
  for _ in $(seq 1 300); do
    grep -q 'listening port=' "$out/$name.out" && break
    sleep 0.1
  done
  port=$(sed -n 's/.*listening port=\([0-9]*\).*/\1/p' "$out/$name.out")
  metrics_port=$(sed -n 's/.*metrics_port=\([0-9]*\).*/\1/p' "$out/$name.out")
  [ -n "$port" ] || fail "$name did not start: $(cat "$out/$name.err")"
}

# Stage 0 a worker of our own (its metrics on a port of its own), the others spawned.
run worker stage_worker/stage_worker --engine=thinker --stage_id=0 \
  --engine_params=batch_size=64,step_time_us=2000 --listen=127.0.0.1:0 \
  --metrics_listen=127.0.0.1:0
worker_metrics=$metrics_port
cat >"$out/pipeline.yaml" <<YAML
name: omni-demo
stages:
  - name: thinker
    addresses: ["127.0.0.1:$port"]
    final_output: true
    output_modality: text
  - name: talker
    engine: talker
    engine_params: {batch_size: 64, step_time_us: 1000, max_tokens: 100000}
    replicas: 2
    output_modality: tokens
    input_mode: streaming
    failover: {max_attempts: 2}
  - name: vocoder
    engine: vocoder
    engine_params: {batch_size: 64, step_time_us: 1000, max_tokens: 100000}
    replicas: 1
    final_output: true
    output_modality: audio
    input_mode: streaming
YAML
run orchestrator orchestrator/orchestrator --config="$out/pipeline.yaml" --listen=127.0.0.1:0 \
  --stage_worker=stage_worker/stage_worker --metrics_listen=127.0.0.1:0
server="--server=127.0.0.1:$port"
orchestrator_metrics=$metrics_port
run gateway gateway/gateway --orchestrator="127.0.0.1:$port" --listen=127.0.0.1:0 \
  --model=omni-demo --voice_stage=2
gateway_port=$port
[ -n "$orchestrator_metrics" ] && [ -n "$worker_metrics" ] || fail "no metrics ports"

# A few requests, so that labelled series and histograms have samples: text and
# audio, streamed input, an abort of a running request, a chat completion.
"$omni" generate "$server" --prompt="Tell me about the sea." >/dev/null 2>"$out/gen.err" ||
  fail "generate: $(cat "$out/gen.err")"
echo "Hello there." | "$omni" speak "$server" --modalities=text >/dev/null 2>"$out/speak.err" ||
  fail "speak: $(cat "$out/speak.err")"
"$omni" generate "$server" --prompt="A long story" --extra=0:sentences=100 \
  --max_tokens=0:1000 --request_id=story >"$out/story.txt" 2>/dev/null &
pids="$pids $!"
for _ in $(seq 1 100); do [ -s "$out/story.txt" ] && break; sleep 0.1; done
"$omni" abort "$server" --ids=story >"$out/abort" || fail "abort: $(cat "$out/abort")"
for _ in $(seq 1 50); do
  curl -sf "http://127.0.0.1:$gateway_port/v1/chat/completions" -o "$out/chat" \
    -d '{"model": "omni-demo", "messages": [{"role": "user", "content": "Hi"}]}' && break
  sleep 0.2
done
grep -q '"finish_reason":"stop"' "$out/chat" || fail "chat completion: $(cat "$out/chat")"

for target in "orchestrator $orchestrator_metrics" "worker $worker_metrics" "gateway $gateway_port"; do
  set -- $target
  curl -sf "http://127.0.0.1:$2/metrics" >"$out/$1.metrics" || fail "no /metrics from the $1"
done
cat "$out"/*.metrics >"$out/all.metrics"

# The dashboard's queries (panels and variables), one per line.
/usr/bin/python3 - "$dashboard" >"$out/exprs" <<'PY' || fail "reading $dashboard"
import json, sys
dashboard = json.load(open(sys.argv[1]))
def panels(items):
    for p in items:
        yield p
        yield from panels(p.get("panels", []))
for p in panels(dashboard["panels"]):
    for t in p.get("targets", []):
        print(t["expr"])
for v in dashboard["templating"]["list"]:
    if v["type"] == "query":
        print(v["definition"])
PY
[ "$(wc -l <"$out/exprs")" -ge 30 ] || fail "only $(wc -l <"$out/exprs") queries in $dashboard"

# Each metric exists (a histogram's _bucket as such), with each label its selectors name.
failed=0
for metric in $(grep -o 'omnistage_[a-z0-9_]*' "$out/exprs" | sort -u); do
  if ! grep -qE "^${metric}[{ ]" "$out/all.metrics"; then
    echo "FAIL: $metric (queried by $dashboard) is in no scrape"
    failed=1
  fi
done
while read -r metric labels; do
  for label in ${labels//,/ }; do
    grep -qE "^${metric}\{(.*,)?${label}=" "$out/all.metrics" ||
      { echo "FAIL: $metric has no label $label"; failed=1; }
  done
done < <(grep -oE 'omnistage_[a-z0-9_]+\{[^}]*\}' "$out/exprs" | sort -u |
  sed -E 's/\{/ /; s/\}//; s/([a-z_]+)=~?"[^"]*"/\1/g; s/ *, */,/g')
[ "$failed" = 0 ] || fail "metrics missing (above)"

# Every query is valid PromQL, evaluated by Prometheus over these three targets.
prometheus_port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cat >"$out/prometheus.yml" <<YAML
global: {scrape_interval: 1s, scrape_timeout: 1s}
scrape_configs:
  - job_name: omnistage
    static_configs:
      - targets: ["127.0.0.1:$orchestrator_metrics", "127.0.0.1:$worker_metrics", "127.0.0.1:$gateway_port"]
YAML
prometheus --config.file="$out/prometheus.yml" --storage.tsdb.path="$out/tsdb" \
  --web.listen-address="127.0.0.1:$prometheus_port" --log.level=warn >"$out/prometheus.log" 2>&1 &
pids="$pids $!"
url="http://127.0.0.1:$prometheus_port"
for _ in $(seq 1 300); do curl -sf "$url/-/ready" >/dev/null && break; sleep 0.1; done
# Two scrapes of all three, so that rate() has samples to work on.
for _ in $(seq 1 100); do
  [ "$(promtool query instant "$url" 'count(count_over_time(up[1m]) >= 2)' 2>/dev/null |
    sed -n 's/.*=> \([0-9]*\) .*/\1/p')" = 3 ] && break
  sleep 0.2
done
while read -r expr; do
  query=${expr//'$__rate_interval'/1m}
  query=${query//'$stage'/.*}
  if ! promtool query instant "$url" "$query" >"$out/result" 2>&1; then
    echo "FAIL: Prometheus refused $query: $(cat "$out/result")"
    failed=1
  elif [[ "$expr" == *omnistage_requests_total* ]] && ! grep -q 'finish_reason="stop"' "$out/result"; then
    echo "FAIL: $query found no finished request: $(cat "$out/result")"
    failed=1
  fi
done < <(grep -v '^label_values(' "$out/exprs")
[ "$failed" = 0 ] || fail "queries (above)"
echo "PASS: $(wc -l <"$out/exprs") queries of $dashboard, their metrics scraped, evaluated by Prometheus"
