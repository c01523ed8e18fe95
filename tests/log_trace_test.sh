#!/usr/bin/env bash
# One request's life across processes in the logs: the orchestrator (JSON
# lines, debug level) spawns the omni pipeline's workers with the same log
# flags; a Generate with a W3C traceparent leaves lines about its id on the
# orchestrator and on every stage's worker, each carrying the trace id, and
# the start-up, replica-up and drain lines are there too.
set -uo pipefail
source tests/orchestrator_process.sh

start_orchestrator orchestrator/configs/local_omni.yaml --log_format=json --log_level=debug

trace=4bf92f3577b34da6a3ce929d0e0e4736
client/omni generate --server="127.0.0.1:$port" --request_id=trace-me --prompt="Follow me" \
  --traceparent="00-$trace-00f067aa0ba902b7-01" --wav= >"$out/text" 2>"$out/err" ||
  fail "generate: $(cat "$out/err")"
stop_orchestrator

/usr/bin/python3 - "$out/orch.err" "$trace" <<'PY' || fail "log lines (above)"
import json, sys
path, trace = sys.argv[1], sys.argv[2]
lines = []
for raw in open(path):
    raw = raw.strip()
    if not raw.startswith("{"):
        continue
    line = json.loads(raw)  # Every JSON line parses.
    for key in ("ts", "level", "service", "msg"):
        assert key in line, ("missing", key, raw)
    lines.append(line)
mine = [l for l in lines if l.get("request_id") == "trace-me"]
for l in mine:
    print(l["service"], l.get("stage"), l["msg"], l.get("trace_id"))
assert mine, "no line about trace-me"
assert all(l.get("trace_id") == trace for l in mine), "a line about trace-me lacks its trace id"
orch = [l for l in mine if l["service"] == "orchestrator"]
workers = {l["stage"] for l in mine if l["service"] == "stage_worker"}
assert any(l["msg"] == "admitted" for l in orch), "no admitted line"
assert {l.get("stage") for l in orch if l["msg"] == "sent to the stage"} == {0, 1, 2}, orch
assert any(l["msg"].startswith("finished") for l in orch), "no finished line"
assert workers == {0, 1, 2}, ("worker lines for stages", workers)
msgs = [l["msg"] for l in lines]
assert any(m.startswith("serving pipeline 'omni-demo'") for m in msgs), "no start-up line"
assert sum(m.startswith("up: instance") for m in msgs) == 4, "not 4 replica-up lines"
assert any(m.startswith("SIGTERM, draining") for m in msgs), "no SIGTERM line"
assert any(m.startswith("drained") for m in msgs), "no drained line"
print("PASS:", len(mine), "lines about trace-me across", 1 + len(workers), "processes")
PY
