# Sourced by shell tests: ./demo.sh --serve from the runfiles tree (its binaries
# built by the test's data, OMNISTAGE_DEMO_BIN=.), stopped when the test exits.
#
#   source tests/demo_serve.sh
#   start_demo 0                # any free ports; sets $demo (PID), $grpc_port, $gateway_port
#   stop_demo                   # Ctrl-C (SIGINT to its process group); fails unless it exits 130
#
# Its stderr is in $out/demo.err (the services' log lines and the demo's own).

out="${TEST_TMPDIR:-$(mktemp -d)}"
fail() { echo "FAIL: $*"; exit 1; }

# start_demo PORT: the demo serving on PORT (0: any) with its gateway on any
# port; waits (up to 120 s) for "demo: serving".
start_demo() {
  # As from a terminal: in a process group of its own (job control), and with
  # SIGINT not ignored (as a plain background job's is).
  set -m
  OMNISTAGE_DEMO_BIN=. GATEWAY_PORT=0 ./demo.sh --serve "$1" >"$out/demo.out" 2>"$out/demo.err" &
  demo=$!
  set +m
  # The demo stops its services on SIGTERM too; KILL only what outlives that.
  trap 'kill -TERM $demo 2>/dev/null || true; for _ in $(seq 1 100); do kill -0 $demo 2>/dev/null || break; sleep 0.1; done; kill -KILL $demo 2>/dev/null || true' EXIT
  for _ in $(seq 1 1200); do
    grep -q '^demo: serving' "$out/demo.err" && break
    kill -0 "$demo" 2>/dev/null || fail "the demo ended: $(tail -n 20 "$out/demo.err")"
    sleep 0.1
  done
  local serving
  serving=$(grep '^demo: serving' "$out/demo.err") || fail "the demo did not serve in 120 s: $(tail -n 20 "$out/demo.err")"
  grpc_port=$(sed -n 's/.* on 127\.0\.0\.1:\([0-9]*\) (gRPC).*/\1/p' <<<"$serving")
  gateway_port=$(sed -n 's/.* and 127\.0\.0\.1:\([0-9]*\) (OpenAI API).*/\1/p' <<<"$serving")
  [ -n "$grpc_port" ] && [ -n "$gateway_port" ] || fail "no ports in: $serving"
}

# Ctrl-C: SIGINT to the demo's process group, as a terminal sends it.
stop_demo() {
  kill -INT -- "-$demo"
  local rc=0
  wait "$demo" || rc=$?
  trap - EXIT
  [ "$rc" -eq 130 ] || fail "the demo exited $rc after SIGINT: $(tail -n 20 "$out/demo.err")"
}
