# Sourced by shell tests: starts an orchestrator binary from the runfiles tree and
# makes sure it is stopped by PID when the test exits, however it exits.
#
#   source tests/orchestrator_process.sh
#   start_orchestrator orchestrator/configs/local_sim.yaml   # sets $pid, $port, $server
#   start_orchestrator CONFIG --log_format=json               # more orchestrator flags
#   ...
#   stop_orchestrator                                         # SIGTERM; fails on a bad exit

out="${TEST_TMPDIR:-$(mktemp -d)}"
fail() { echo "FAIL: $*"; exit 1; }

start_orchestrator() {
  local config="$1"
  shift
  orchestrator/orchestrator --config="$config" --listen=127.0.0.1:0 \
    --stage_worker=stage_worker/stage_worker "$@" >"$out/orch.out" 2>"$out/orch.err" &
  pid=$!
  trap 'kill -KILL $pid 2>/dev/null; wait $pid 2>/dev/null || true' EXIT
  for _ in $(seq 1 300); do
    grep -q 'listening port=' "$out/orch.out" && break
    sleep 0.1
  done
  port=$(sed -n 's/.*listening port=\([0-9]*\).*/\1/p' "$out/orch.out")
  [ -n "$port" ] || { cat "$out/orch.err"; fail "orchestrator did not start"; }
  server="--server=127.0.0.1:$port"
}

stop_orchestrator() {
  kill -TERM "$pid"
  wait "$pid" || fail "orchestrator exit code $?"
  trap - EXIT
}
