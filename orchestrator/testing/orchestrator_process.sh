# Sourced by shell tests: starts an orchestrator binary from the runfiles tree and
# makes sure it is stopped by PID when the test exits, however it exits.
#
#   source orchestrator/testing/orchestrator_process.sh
#   start_orchestrator pipelines/local_sim.yaml   # sets $pid, $port, $server
#   start_orchestrator CONFIG --log_format=json               # more orchestrator flags
#   ...
#   stop_orchestrator                                         # SIGTERM; fails on a bad exit
#   other_port=$(listened_port other)   # a process started with >$out/other.out 2>$out/other.err
#   wait_healthy http://127.0.0.1:8000  # a gateway's GET /health is 200 (up to 30 s)
#   thinker_pipeline "$out/thinker.yaml"  # a config of one stage writing text
#   start_gateway gw --drain_timeout_ms=300  # sets $gw (PID, in $pids), $gw_port
#   metrics=$(metrics_url); expect_idle "$metrics"  # nothing in flight (up to 10 s)
#   with_test_speaker pipelines/local_listener.yaml "$out/listener.yaml"

out="${TEST_TMPDIR:-$(mktemp -d)}"
fail() { echo "FAIL: $*"; exit 1; }

# listened_port NAME: the port of the "listening port=" line in $out/NAME.out
# (waiting up to 30 s for it); fails the test, with NAME's stderr, without one.
listened_port() {
  for _ in $(seq 1 300); do
    grep -q 'listening port=' "$out/$1.out" && break
    sleep 0.1
  done
  local found
  found=$(sed -n 's/.*listening port=\([0-9]*\).*/\1/p' "$out/$1.out")
  # Called as $(listened_port NAME): what it says goes to stderr.
  [ -n "$found" ] || { cat "$out/$1.err" >&2; echo "FAIL: $1 did not start" >&2; exit 1; }
  echo "$found"
}

# wait_healthy URL [CURL_FLAGS...]: waits up to 30 s for GET URL/health to
# answer 200 (a gateway that reaches a ready orchestrator); says nothing. As
# long as that: on a loaded machine a gateway's first DNS lookup can fail, and
# gRPC tries again after 1 s, 1.6 s, 2.6 s, ...
wait_healthy() {
  local url="$1"
  shift
  for _ in $(seq 1 300); do
    curl -sf "$@" "$url/health" >/dev/null && return 0
    sleep 0.1
  done
  return 0
}

# thinker_pipeline FILE [ENGINE_PARAMS]: writes a pipeline config (named
# omni-demo, as the gateway's default model) of one stage, a spawned thinker,
# that writes text; ENGINE_PARAMS (YAML, without braces) replace its
# "batch_size: 8, step_time_us: 1000".
thinker_pipeline() {
  cat >"$1" <<YAML
name: omni-demo
stages:
  - name: thinker
    engine: thinker
    engine_params: {${2:-batch_size: 8, step_time_us: 1000}}
    replicas: 1
    final_output: true
    output_modality: text
YAML
}

# start_gateway NAME FLAGS...: a gateway in front of the orchestrator started
# last ($port) on a port of its own, output in $out/NAME.out and .err; sets gw
# (its PID, added to $pids) and gw_port, and waits until it is healthy.
start_gateway() {
  local name="$1"
  shift
  : >"$out/$name.out"  # as start_orchestrator's
  gateway/gateway --orchestrator="127.0.0.1:$port" --listen=127.0.0.1:0 "$@" \
    >"$out/$name.out" 2>"$out/$name.err" &
  gw=$!
  pids="${pids:-} $gw"
  gw_port=$(listened_port "$name") || exit 1
  wait_healthy "http://127.0.0.1:$gw_port"
}

start_orchestrator() {
  local config="$1"
  shift
  # Emptied here, before the read below: a test that starts another
  # orchestrator must not read the last one's listening line while the new
  # process has yet to open (and truncate) the file.
  : >"$out/orch.out"
  orchestrator/orchestrator --config="$config" --listen=127.0.0.1:0 \
    --stage_worker=stage_worker/stage_worker "$@" >"$out/orch.out" 2>"$out/orch.err" &
  pid=$!
  trap 'kill -KILL $pid 2>/dev/null; wait $pid 2>/dev/null || true' EXIT
  port=$(listened_port orch) || exit 1
  server="--server=127.0.0.1:$port"
}

stop_orchestrator() {
  kill -TERM "$pid"
  local rc=0
  wait "$pid" || rc=$?
  [ "$rc" -eq 0 ] || fail "orchestrator exit code $rc; its last lines: $(tail -n 20 "$out/orch.err")"
  trap - EXIT
}

# metrics_url: the orchestrator's /metrics, when it was started with
# --metrics_listen=127.0.0.1:0 (its port from its listening line).
metrics_url() {
  echo "http://127.0.0.1:$(sed -n 's/.*metrics_port=\([0-9]*\).*/\1/p' "$out/orch.out")/metrics"
}

# expect_idle METRICS_URL: fails unless the orchestrator shows no request in
# flight within 10 s. (Each scrape is read whole first: grep -q stopping early
# would fail curl's write, and the pipe.)
expect_idle() {
  for _ in $(seq 1 100); do
    curl -s -m 5 "$1" >"$out/metrics.txt" || true
    grep -q '^omnistage_in_flight_requests 0$' "$out/metrics.txt" && return 0
    sleep 0.1
  done
  fail "requests left in flight: $(grep '^omnistage_in_flight_requests' "$out/metrics.txt")"
}

# with_test_speaker CONFIG OUT: CONFIG (a pipeline whose listener has
# engine_params {batch_size: 4}) written to OUT with the listener told the
# test speaker's channel mean, as a deployment tells it its microphones'
# (stage_worker/engines/testing/test_speaker.h; needs speak_pcm in the data).
with_test_speaker() {
  local mean
  mean=$(stage_worker/engines/testing/speak_pcm --channel_mean) || fail "speak_pcm --channel_mean"
  sed "s/engine_params: {batch_size: 4}/engine_params: {batch_size: 4, cmn_init: \"$mean\"}/" \
    "$1" >"$2"
  grep -q cmn_init "$2" || fail "the listener's engine_params in $1 changed: update with_test_speaker"
}
