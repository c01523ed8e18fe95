#!/usr/bin/env bash
# The gateway in front of several orchestrators, found by DNS as a headless
# Service finds them in a cluster (one A record per orchestrator; here a real
# DNS server, dnsmasq, on loopback, and each orchestrator on its own loopback
# address), as real processes:
# - an orchestrator added to DNS gets completions once the gateway looks the
#   name up again (each connection is asked to go after the orchestrators'
#   limits.max_connection_age_ms, 2 s here, and the gateway then re-resolves);
# - whole chat completions spread over both orchestrators; one whose client
#   gives up before the answer is stopped (nothing in flight after);
# - one orchestrator drains (SIGTERM) while it holds a stream: every completion
#   sent during its drain is answered 200 (by the other), the gateway's /health
#   stays 200, the stream ends whole, and the drained orchestrator exits 0;
# - the last orchestrator killed mid-stream: that stream ends with an error
#   event and [DONE]; then, with no orchestrator left, a completion is a 503
#   server_error.
# Stops what it starts, by PID.
set -euo pipefail
source orchestrator/testing/orchestrator_process.sh
[ -x /usr/sbin/dnsmasq ] || fail "/usr/sbin/dnsmasq is missing: install dnsmasq-base (./setup.sh does)"

# A long reply per request (100 sentences, some 300 tokens, at 20 ms a token),
# so the stream outlasts the drain's checks; drain_timeout_ms long enough for
# it to finish.
cat >"$out/pipeline.yaml" <<YAML
name: omni-demo
drain_timeout_ms: 30000
limits: {max_connection_age_ms: 2000, max_connection_age_grace_ms: 60000}
stages:
  - name: thinker
    engine: thinker
    engine_params: {batch_size: 64, step_time_us: 20000}
    replicas: 1
    final_output: true
    output_modality: text
    defaults: {max_tokens: 100000, extra: {sentences: 100}}
YAML

pids=""
trap 'kill -KILL $pids 2>/dev/null; wait $pids 2>/dev/null || true' EXIT

# The DNS server: names under .test from the files in $out/hosts (re-read when
# one is renamed into place), nothing else, nothing cached. Until the first
# records call, its one record is the readiness probe's: an answer with it comes
# from this dnsmasq. A port found free can be taken (by another test's server)
# before dnsmasq binds it: up to three ports are tried.
mkdir -p "$out/hosts"
# dns_answers PORT: whether a DNS server on 127.0.0.1:PORT answers the probe's
# name with the probe's address within 5 s.
dns_answers() {
  /usr/bin/python3 - "$1" <<'PY'
import socket, struct, sys, time
query = struct.pack(">HHHHHH", 0x5eed, 0x0100, 1, 0, 0, 0)
for label in b"probe.omni.test".split(b"."):
    query += bytes([len(label)]) + label
query += b"\0" + struct.pack(">HH", 1, 1)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(0.2)
deadline = time.time() + 5
while time.time() < deadline:
    try:
        s.sendto(query, ("127.0.0.1", int(sys.argv[1])))
        if socket.inet_aton("127.0.0.9") in s.recv(512):
            sys.exit(0)
    except OSError:
        time.sleep(0.1)
sys.exit(1)
PY
}
dns_pid=""
for _ in 1 2 3; do
  echo "127.0.0.9 probe.omni.test" >"$out/hosts/records"
  dns_port=$(/usr/bin/python3 -c 'import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  /usr/sbin/dnsmasq --keep-in-foreground --conf-file=/dev/null --no-resolv --no-hosts \
    --hostsdir="$out/hosts" --listen-address=127.0.0.1 --bind-interfaces --port="$dns_port" \
    --local=/test/ --local-ttl=0 --user="$(id -un)" --pid-file= 2>"$out/dns.err" &
  dns_pid=$!
  pids="$pids $dns_pid"
  dns_answers "$dns_port" && break
  kill -KILL "$dns_pid" 2>/dev/null || true
  wait "$dns_pid" 2>/dev/null || true
  dns_pid=""
done
[ -n "$dns_pid" ] || fail "dnsmasq did not answer on three ports: $(cat "$out/dns.err")"
# records IP...: the orchestrators' name answers with these addresses.
records() {
  local ip
  for ip in "$@"; do echo "$ip orchestrators.omni.test"; done >"$out/records.new"
  mv "$out/records.new" "$out/hosts/records"
}

# start NAME IP [PORT]: an orchestrator at IP:PORT (PORT 0 or unset: a free
# one) with its own metrics port; sets NAME_pid, NAME_port and NAME_metrics.
start() {
  orchestrator/orchestrator --config="$out/pipeline.yaml" --listen="$2:${3:-0}" \
    --metrics_listen=127.0.0.1:0 --stage_worker=stage_worker/stage_worker \
    >"$out/$1.out" 2>"$out/$1.err" &
  printf -v "$1_pid" %s $!
  pids="$pids $!"
  local port
  port=$(listened_port "$1") || exit 1
  printf -v "$1_port" %s "$port"
  printf -v "$1_metrics" %s "$(sed -n 's/.* metrics_port=\([0-9]*\).*/\1/p' "$out/$1.out")"
}
# Both on one port, as pods of one Deployment are.
start a 127.0.0.2
start b 127.0.0.3 "$a_port"
a_ip=127.0.0.2 b_ip=127.0.0.3
records 127.0.0.2

gateway/gateway --orchestrator="dns://127.0.0.1:$dns_port/orchestrators.omni.test:$a_port" \
  --listen=127.0.0.1:0 >"$out/gw.out" 2>"$out/gw.err" &
pids="$pids $!"
base="http://127.0.0.1:$(listened_port gw)"
wait_healthy "$base"
curl -sf "$base/health" >/dev/null || fail "gateway not healthy: $(curl -s "$base/health")"

# complete NAME: one short, whole chat completion; prints its HTTP status, the
# body in $out/NAME.json.
complete() {
  curl -s -o "$out/$1.json" -w '%{http_code}' "$base/v1/chat/completions" -d '{"model":
    "omni-demo", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 3}'
}
# finished NAME: the requests the orchestrator NAME's metrics count as ended.
finished() {
  local metrics_port="${1}_metrics"
  curl -s "http://127.0.0.1:${!metrics_port}/metrics" |
    awk '/^omnistage_requests_total\{/ {n += $2} END {print n + 0}'
}

# Only a is in DNS: b, running, gets nothing.
for i in $(seq 1 4); do
  code=$(complete "first$i")
  [ "$code" = 200 ] || fail "completion $i: HTTP $code: $(cat "$out/first$i.json")"
done
[ "$(finished b)" = 0 ] || fail "b got $(finished b) completion(s) before DNS named it"
# b joins DNS: found once a's connection is asked to go (2 s) and the gateway
# looks the name up again.
records 127.0.0.2 127.0.0.3
for i in $(seq 1 150); do
  [ "$(finished b)" -gt 0 ] && break
  code=$(complete "join$i")
  [ "$code" = 200 ] || fail "completion $i after b joined DNS: HTTP $code: $(cat "$out/join$i.json")"
  sleep 0.1
done
[ "$(finished b)" -gt 0 ] || fail "b, in DNS, got no completion in 15 s"
echo "join: b answered after $i completion(s)"

before_a=$(finished a) before_b=$(finished b)
for i in $(seq 1 12); do
  code=$(complete "spread$i")
  [ "$code" = 200 ] || fail "completion $i: HTTP $code: $(cat "$out/spread$i.json")"
done
spread_a=$(( $(finished a) - before_a )) spread_b=$(( $(finished b) - before_b ))
[ "$spread_a" -ge 3 ] && [ "$spread_b" -ge 3 ] ||
  fail "12 completions were not spread: $spread_a on a, $spread_b on b"
echo "spread: $spread_a and $spread_b of 12"

# in_flight NAME: the requests orchestrator NAME holds.
in_flight() {
  local port="${1}_port"
  local ip="${1}_ip"
  client/omni status --json --server="${!ip}:${!port}" 2>/dev/null |
    sed -n 's/.*"inFlightRequests": \([0-9]*\).*/\1/p'
}
# A whole (not streamed) completion whose client gives up after 1 s, long
# before the answer (some 6 s): the gateway sees the socket close and cancels
# the call, so no orchestrator holds the request after.
rc=0
curl -s -m 1 -o /dev/null "$base/v1/chat/completions" -d '{"model": "omni-demo",
  "messages": [{"role": "user", "content": "A long story"}]}' || rc=$?
[ "$rc" = 28 ] || fail "the long whole completion ended within 1 s (curl exit $rc)"
for _ in $(seq 1 30); do
  [ "$(in_flight a)" = 0 ] && [ "$(in_flight b)" = 0 ] && break
  sleep 0.1
done
[ "$(in_flight a)" = 0 ] && [ "$(in_flight b)" = 0 ] ||
  fail "3 s after its client left, a whole completion is still in flight ($(in_flight a) and $(in_flight b))"
echo "left: a whole completion's client gave up; nothing in flight after"

# stream NAME: a long streamed completion into $out/NAME.sse, in the
# background (its client's pid in $curl_pid); returns once events came.
stream() {
  curl -sN "$base/v1/chat/completions" -d '{"model": "omni-demo", "messages": [{"role":
    "user", "content": "A long story"}], "stream": true}' >"$out/$1.sse" &
  curl_pid=$!
  pids="$pids $curl_pid"
  for _ in $(seq 1 100); do
    [ -s "$out/$1.sse" ] && break
    sleep 0.05
  done
  [ -s "$out/$1.sse" ] || fail "the stream $1 never began"
}

# A long stream, then the orchestrator holding it drains.
stream long
if [ "$(in_flight a)" = 1 ]; then holder=a other=b; else holder=b other=a; fi
[ "$(in_flight "$holder")" = 1 ] || fail "neither orchestrator holds the long stream"
holder_pid="${holder}_pid"
before_other=$(finished "$other")
kill -TERM "${!holder_pid}"

# During its drain: every completion is answered, the gateway stays ready.
for i in $(seq 1 20); do
  code=$(complete "drain$i")
  [ "$code" = 200 ] || fail "completion $i during the drain: HTTP $code: $(cat "$out/drain$i.json")"
  health=$(curl -s -o /dev/null -w '%{http_code}' "$base/health")
  [ "$health" = 200 ] || fail "the gateway's /health answered $health during the drain"
done
[ "$(( $(finished "$other") - before_other ))" -ge 20 ] ||
  fail "the other orchestrator did not answer the completions sent during the drain"
kill -0 "${!holder_pid}" 2>/dev/null || fail "the draining orchestrator ended before its stream"

wait "$curl_pid" || fail "the long stream's client failed"
tail -c 200 "$out/long.sse" | grep -q 'data: \[DONE\]' ||
  fail "the stream on the draining orchestrator was cut: $(tail -c 300 "$out/long.sse")"
grep -q '"finish_reason":"stop"' "$out/long.sse" ||
  fail "the long stream did not finish with stop: $(tail -c 300 "$out/long.sse")"
rc=0
wait "${!holder_pid}" || rc=$?
[ "$rc" = 0 ] || fail "the drained orchestrator exited $rc; its last lines: $(tail -n 30 "$out/$holder.err")"
echo "drain: 20 completions answered while $holder drained; its stream ended whole"

# The last orchestrator killed mid-stream: the stream's client gets an
# OpenAI-shaped error event and [DONE] (the SDKs raise it), the gateway goes
# on, and with no orchestrator left a completion is a 503 server_error.
stream cut
other_pid="${other}_pid"
kill -KILL "${!other_pid}"
wait "$curl_pid" || fail "the cut stream's client failed"
tail -c 600 "$out/cut.sse" | grep -q '^data: {"error":{.*"type":"server_error"' ||
  fail "the cut stream ends without an error event: $(tail -c 400 "$out/cut.sse")"
grep -q '"message":"the stream broke before its end: ' "$out/cut.sse" ||
  fail "the error event does not say the stream broke: $(tail -c 400 "$out/cut.sse")"
tail -c 20 "$out/cut.sse" | grep -q 'data: \[DONE\]' || fail "the cut stream has no [DONE]"
echo "cut: $(grep -o '"message":"[^"]*"' "$out/cut.sse" | tail -1)"
code=$(complete gone)
[ "$code" = 503 ] || fail "with no orchestrator: HTTP $code: $(cat "$out/gone.json")"
grep -q '"type":"server_error"' "$out/gone.json" || fail "not a server_error: $(cat "$out/gone.json")"
echo PASS
