#!/usr/bin/env bash
# One request's life across processes in the logs: the orchestrator (JSON
# lines, debug level) spawns the omni pipeline's workers with the same log
# flags; a Generate with a W3C traceparent leaves lines about its id on the
# orchestrator and on every stage's worker, each carrying the trace id, and
# the start-up, replica-up and drain lines are there too. The request has one
# access line naming the replica of each stage; every worker line names its
# stage and instance (the two talker replicas' lines differ by it), and every
# line about a session its session.
set -uo pipefail
source orchestrator/testing/orchestrator_process.sh

start_orchestrator pipelines/local_omni.yaml --log_format=json --log_level=debug

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
access = [l for l in orch if l["msg"].startswith("access ")]
assert len(access) == 1, ("not one access line", access)
for want in ("finish=stop", "stages=thinker:0@", ",talker:", ",vocoder:0@", "output_tokens="):
    assert want in access[0]["msg"], ("access line lacks", want, access[0])
own = [l for l in lines if l["service"] == "stage_worker" and not l["msg"].startswith("grpc ")]
assert all("stage" in l and l.get("instance") for l in own), \
    [l for l in own if "stage" not in l or not l.get("instance")]
about_sessions = [l for l in own if l["msg"].startswith(("session ", "added", "finished"))]
assert about_sessions and all("session" in l for l in about_sessions), \
    [l for l in about_sessions if "session" not in l]
talkers = [l for l in own if l["stage"] == 1 and l["msg"].startswith("session opened")]
assert len({l["instance"] for l in talkers}) == 2, ("two talker replicas' sessions", talkers)
print("PASS:", len(mine), "lines about trace-me across", 1 + len(workers), "processes")
PY
