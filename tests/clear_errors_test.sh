#!/usr/bin/env bash
# One clear line, naming the fix, where gRPC or OpenSSL used to speak first —
# as real processes on loopback:
# - stage_worker on a taken port (--listen, --metrics_listen): exit 2 and one
#   line saying the port is held and what to do (not gRPC's chttp2_server.cc
#   error block, then "cannot listen on ..." with no reason);
# - omni over TLS with the wrong CA, and over TLS to a plaintext orchestrator:
#   exit 4 and one line naming --tls_ca (not the handshake's raw lines first);
#   the Python example: no raw gRPC line either;
# - the gateway dialling a TLS orchestrator without --orchestrator_tls_ca, or
#   with the wrong one: the 503 and /health name the flag, and its stderr holds
#   no raw gRPC line.
# Stops what it starts, by PID.
set -euo pipefail
source orchestrator/testing/orchestrator_process.sh
c="$out/certs"
deploy/certs/make_dev_certs.sh "$c" >/dev/null 2>&1

# raw_free FILE: no line of gRPC's own format ("E1201 15:16:20.266 file.cc:12]").
raw_free() {
  ! grep -Eq '^[DIWE][0-9]{4} [0-9:.]+ +[0-9]+ [a-z_0-9]+\.(cc|h):[0-9]+\]' "$1" ||
    fail "raw gRPC lines in $1: $(cat "$1")"
  ! grep -q 'ssl_transport_security\|chttp2_server\|SSL_ERROR_SSL' "$1" ||
    fail "raw gRPC lines in $1: $(cat "$1")"
}
# one_line FILE PATTERN: FILE is exactly one line, holding PATTERN.
one_line() {
  raw_free "$1"
  [ "$(wc -l <"$1")" -eq 1 ] || fail "not one line: $(cat "$1")"
  grep -qF -- "$2" "$1" || fail "no '$2' in: $(cat "$1")"
}

start_orchestrator pipelines/local_sim.yaml \
  --tls_cert="$c/orchestrator.crt" --tls_key="$c/orchestrator.key"
tls_port=$port
tls_pid=$pid
orchestrator/orchestrator --config=pipelines/local_sim.yaml --listen=127.0.0.1:0 \
  --stage_worker=stage_worker/stage_worker >"$out/plain.out" 2>"$out/plain.err" &
plain_pid=$!
pids="$tls_pid $plain_pid"
trap 'kill -KILL $pids 2>/dev/null; wait $pids 2>/dev/null || true' EXIT
plain_port=$(listened_port plain)

# stage_worker on a port the orchestrator holds.
for flag in --listen --metrics_listen; do
  set +e
  if [ "$flag" = --listen ]; then
    stage_worker/stage_worker --listen="127.0.0.1:$tls_port" >/dev/null 2>"$out/worker.err"
  else
    stage_worker/stage_worker --listen=127.0.0.1:0 --metrics_listen="127.0.0.1:$tls_port" \
      >/dev/null 2>"$out/worker.err"
  fi
  rc=$?
  set -e
  [ "$rc" -eq 2 ] || fail "stage_worker $flag on a taken port: exit $rc: $(cat "$out/worker.err")"
  one_line "$out/worker.err" "stage_worker: cannot listen on 127.0.0.1:$tls_port ($flag): Address already in use; another process holds that port: stop it, or give $flag another port (0 picks a free one)"
done
echo "stage_worker: a taken port is one line"

# omni over TLS: the wrong CA (the worker certificate is no CA of the
# orchestrator's), and a plaintext orchestrator.
expect_omni() {  # RC FILE PATTERN ARGS...
  local want="$1" pattern="$2"
  shift 2
  set +e
  client/omni status "$@" >/dev/null 2>"$out/omni.err"
  local rc=$?
  set -e
  [ "$rc" -eq "$want" ] || fail "omni $*: exit $rc: $(cat "$out/omni.err")"
  one_line "$out/omni.err" "$pattern"
}
expect_omni 4 "omni: the orchestrator at 127.0.0.1:$tls_port presented a certificate that does not chain to --tls_ca=$c/worker.crt (certificate verify failed): pass the CA that issued it with --tls_ca" \
  --server="127.0.0.1:$tls_port" --tls_ca="$c/worker.crt"
expect_omni 4 "omni: the orchestrator at 127.0.0.1:$plain_port does not speak TLS (wrong version number): drop --tls and --tls_ca" \
  --server="127.0.0.1:$plain_port" --tls_ca="$c/ca.crt"
expect_omni 4 "if it serves TLS, pass --tls_ca" --server="127.0.0.1:$tls_port"
echo "omni: a TLS failure is one line"

set +e
PYTHONPATH=client/python/package /usr/bin/python3 client/python/examples/omni_client.py \
  --server "127.0.0.1:$tls_port" --tls_ca "$c/worker.crt" --prompt hi >/dev/null 2>"$out/py.err"
rc=$?
set -e
[ "$rc" -eq 4 ] || fail "python example with the wrong CA: exit $rc: $(cat "$out/py.err")"
one_line "$out/py.err" "over TLS (is it running, serving TLS, with a certificate that chains to tls_ca"
echo "python: a TLS failure is one line"

# The gateway in front of the TLS orchestrator: without a CA, with the wrong one.
check_gateway() {  # NAME FIX FLAGS...
  local name="$1" fix="$2"
  shift 2
  gateway/gateway --orchestrator="127.0.0.1:$tls_port" --listen=127.0.0.1:0 "$@" \
    >"$out/$name.out" 2>"$out/$name.err" &
  pids="$pids $!"
  local base
  base="http://127.0.0.1:$(listened_port "$name")"
  local code
  code=$(curl -s -o "$out/$name.json" -w '%{http_code}' "$base/v1/chat/completions" \
    -d '{"model": "omni-demo", "messages": [{"role": "user", "content": "Hi"}]}')
  [ "$code" = 503 ] || fail "$name: HTTP $code: $(cat "$out/$name.json")"
  grep -qF -- "$fix" "$out/$name.json" || fail "$name: no '$fix' in $(cat "$out/$name.json")"
  curl -s "$base/health" >"$out/$name-health.json"
  grep -qF -- "$fix" "$out/$name-health.json" ||
    fail "$name /health: no '$fix' in $(cat "$out/$name-health.json")"
  raw_free "$out/$name.err"
}
check_gateway no-ca "so it may serve TLS: start the gateway with --orchestrator_tls_ca"
check_gateway wrong-ca "the orchestrator's certificate does not chain to --orchestrator_tls_ca" \
  --orchestrator_tls_ca="$c/worker.crt"
echo "gateway: the 503 and /health name the fix"
echo PASS
