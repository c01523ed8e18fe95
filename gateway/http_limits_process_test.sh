#!/usr/bin/env bash
# The gateway's HTTP limits as real processes on loopback (a one-stage
# pipeline, the gateway with small limits through its flags, raw sockets from
# Debian's python3 and curl as clients):
# - 40 slow clients, each sending part of a request and then a byte every
#   200 ms, are all closed by --request_read_timeout_ms, while a completion
#   from another address (127.0.0.2) is served;
# - a request with 20,000 header lines (160 KB) is refused with 400;
# - connections over --max_connections_per_address are refused at once (503)
#   while a completion from another address is served;
# - the gateway's metrics count each.
# Stops what it starts, by PID.
set -euo pipefail
source orchestrator/testing/orchestrator_process.sh

thinker_pipeline "$out/thinker.yaml"
start_orchestrator "$out/thinker.yaml"
pids="$pid"
trap 'kill -KILL $pids 2>/dev/null; wait $pids 2>/dev/null || true' EXIT
# complete FROM: a chat completion from the address FROM; prints the status.
complete() {
  curl -s --interface "$1" -o "$out/complete.json" -w '%{http_code}' \
    "http://127.0.0.1:$gw_port/v1/chat/completions" \
    -d '{"model": "omni-demo", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 3}'
}
# metric NAME_AND_LABELS: its value on the gateway's /metrics.
metric() {
  curl -s --interface 127.0.0.2 "http://127.0.0.1:$gw_port/metrics" |
    awk -v m="$1" '$1 == m {print $2}'
}

# The raw-socket clients, run with Debian's python3: client SCENARIO PORT.
cat >"$out/client.py" <<'PY'
import socket, sys, time

def answer_of(sock):
    """What arrives until the gateway closes the connection."""
    answer = b""
    while True:
        data = sock.recv(65536)
        if not data:
            return answer
        answer += data

def slow(port):
    """40 clients send part of a request, then a byte every 200 ms."""
    clients = []
    for _ in range(40):
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: test\r\n")
        s.setblocking(False)
        clients.append(s)
    start = time.monotonic()
    open_ = set(range(len(clients)))
    while open_ and time.monotonic() - start < 10:
        for i in list(open_):
            try:
                if clients[i].recv(4096) == b"":
                    open_.discard(i)
                    continue
            except BlockingIOError:
                pass
            except OSError:
                open_.discard(i)
                continue
            try:
                clients[i].send(b"X")
            except OSError:
                open_.discard(i)
        time.sleep(0.2)
    took = time.monotonic() - start
    assert not open_, f"{len(open_)} slow clients still open after {took:.1f} s"
    assert 0.8 < took < 4, f"closed after {took:.1f} s (the deadline is 1 s)"
    print(f"40 slow clients closed after {took:.1f} s")

def flood(port):
    """A request with 20,000 header lines."""
    s = socket.create_connection(("127.0.0.1", port))
    head = b"POST /v1/chat/completions HTTP/1.1\r\nHost: test\r\n" + \
        b"".join(b"X-%05d: a\r\n" % i for i in range(20000)) + b"\r\n"
    assert len(head) > 160000
    try:
        s.sendall(head)
    except OSError:
        pass
    answer = answer_of(s)
    assert answer.startswith(b"HTTP/1.1 400"), answer[:100]
    print("20,000 header lines: 400")

def capped(port):
    """20 connections from 127.0.0.1 held, then one more."""
    held = [socket.create_connection(("127.0.0.1", port)) for _ in range(20)]
    time.sleep(0.5)  # Each is taken in on the gateway's next turn.
    start = time.monotonic()
    extra = socket.create_connection(("127.0.0.1", port))
    extra.settimeout(5)
    answer = answer_of(extra)
    took = time.monotonic() - start
    assert answer.startswith(b"HTTP/1.1 503"), answer[:200]
    assert b"too many connections from 127.0.0.1" in answer, answer
    assert took < 1, f"refused after {took:.1f} s"
    print(f"the 21st connection from 127.0.0.1: 503 after {took * 1000:.0f} ms", flush=True)
    time.sleep(3)  # Holds the 20 while the other address is served.
    assert len(held) == 20

{"slow": slow, "flood": flood, "capped": capped}[sys.argv[1]](int(sys.argv[2]))
PY
client() { /usr/bin/python3 "$out/client.py" "$@"; }

start_gateway slow --request_read_timeout_ms=1000
client slow "$gw_port" &
slow_pid=$!
pids="$pids $slow_pid"
code=$(complete 127.0.0.2)
[ "$code" = 200 ] || fail "a completion while slow clients trickle: HTTP $code: $(cat "$out/complete.json")"
wait "$slow_pid" || fail "slow clients (above)"
[ "$(metric 'omnistage_gateway_http_refusals_total{reason="request_read_timeout"}')" = 40 ] ||
  fail "timeouts counted: $(metric 'omnistage_gateway_http_refusals_total{reason="request_read_timeout"}')"

client flood "$gw_port" || fail "20,000 header lines (above)"
[ "$(metric 'omnistage_gateway_http_refusals_total{reason="bad_request"}')" = 1 ] ||
  fail "the 400 is not counted: $(metric 'omnistage_gateway_http_refusals_total{reason="bad_request"}')"

# The cap per address, on a gateway without a short deadline.
start_gateway capped --max_connections_per_address=20
client capped "$gw_port" &
held_pid=$!
pids="$pids $held_pid"
for _ in $(seq 1 50); do
  [ "$(metric 'omnistage_gateway_http_refusals_total{reason="max_connections_per_address"}')" = 1 ] && break
  sleep 0.1
done
[ "$(metric 'omnistage_gateway_http_refusals_total{reason="max_connections_per_address"}')" = 1 ] ||
  fail "the refusal is not counted"
[ "$(metric 'omnistage_gateway_http_connections')" -ge 20 ] ||
  fail "open connections: $(metric 'omnistage_gateway_http_connections')"
code=$(complete 127.0.0.2)
[ "$code" = 200 ] || fail "a completion from another address: HTTP $code: $(cat "$out/complete.json")"
wait "$held_pid" || fail "held connections (above)"
echo PASS
