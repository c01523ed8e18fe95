#!/usr/bin/env bash
# The orchestrator in local mode, as processes: it spawns its workers, restarts
# one that is killed (a new incarnation, re-admitted), refuses to start on a taken
# port with a clear message, and leaves no worker behind after SIGTERM.
set -euo pipefail

omni=client/omni
source tests/orchestrator_process.sh
start_orchestrator orchestrator/configs/local_sim.yaml

instance() { "$omni" status "$server" | sed -n 's/.*"instanceId": "\([^"]*\)".*/\1/p' | head -1; }
alive() { "$omni" status "$server" | grep -q '"alive": true'; }

first=$(instance)
[ -n "$first" ] || fail "no instance id in status"
worker=$(pgrep -P "$pid" -f stage_worker | head -1)
[ -n "$worker" ] || fail "no spawned worker"

# A second orchestrator on the same port: exit code 2 and a message, no crash.
set +e
orchestrator/orchestrator --config=orchestrator/configs/local_sim.yaml \
  --listen="127.0.0.1:$port" --stage_worker=stage_worker/stage_worker >/dev/null 2>"$out/taken"
rc=$?
set -e
[ "$rc" -eq 2 ] || fail "taken port: exit code $rc: $(cat "$out/taken")"
grep -q "cannot listen on 127.0.0.1:$port" "$out/taken" || fail "taken port message: $(cat "$out/taken")"

kill -KILL "$worker"
restarted=""
for _ in $(seq 1 100); do
  now=$(instance)
  if [ -n "$now" ] && [ "$now" != "$first" ] && alive; then restarted="$now"; break; fi
  sleep 0.1
done
[ -n "$restarted" ] || fail "killed worker was not restarted and re-admitted (still '$first')"
echo "restarted: $first -> $restarted"
"$omni" generate "$server" --prompt="after restart" --wav= >"$out/text" 2>"$out/err" ||
  fail "generate after restart: $(cat "$out/err")"

children=$(pgrep -P "$pid" -d' ' -f stage_worker || true)
stop_orchestrator
for child in $children; do
  if kill -0 "$child" 2>/dev/null; then fail "worker $child outlived the orchestrator"; fi
done
echo "1 passed, 0 failed"
