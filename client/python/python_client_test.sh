#!/usr/bin/env bash
# The Python client example against a real local pipeline (orchestrator spawning
# its stage workers from the demo config). Stops what it starts, by PID.
set -euo pipefail

orchestrator=orchestrator/orchestrator
out="${TEST_TMPDIR:-$(mktemp -d)}"
"$orchestrator" --config=orchestrator/configs/local_omni.yaml --listen=127.0.0.1:0 \
  --stage_worker=stage_worker/stage_worker >"$out/orch.out" 2>"$out/orch.err" &
pid=$!
trap 'kill -TERM $pid 2>/dev/null; wait $pid 2>/dev/null || true' EXIT

for _ in $(seq 1 300); do
  grep -q 'listening port=' "$out/orch.out" && break
  sleep 0.1
done
port=$(sed -n 's/.*listening port=\([0-9]*\).*/\1/p' "$out/orch.out")
[ -n "$port" ] || { echo "orchestrator did not start"; cat "$out/orch.err"; exit 1; }

PYTHONPATH=. /usr/bin/python3 client/python/omni_client.py --server "127.0.0.1:$port" \
  --prompt "Hello from Python" --wav "$out/py.wav" >"$out/text" 2>"$out/err"
cat "$out/text" "$out/err"
grep -q '[A-Za-z]' "$out/text" || { echo "FAIL: no text"; exit 1; }
grep -q 'FINISH_REASON_STOP' "$out/err" || { echo "FAIL: no STOP"; exit 1; }
/usr/bin/python3 - "$out/py.wav" <<'PY'
import sys, wave
w = wave.open(sys.argv[1])
assert w.getnchannels() == 1 and w.getsampwidth() == 2 and w.getframerate() == 24000, "format"
assert w.getnframes() > 24000 // 10, "too little audio"
print("wav ok:", w.getnframes(), "frames")
PY

# Unreachable server: a clear message and exit code 4.
set +e
PYTHONPATH=. /usr/bin/python3 client/python/omni_client.py --server 127.0.0.1:1 \
  --prompt x >/dev/null 2>"$out/unreach"
rc=$?
set -e
[ "$rc" -eq 4 ] || { echo "FAIL: unreachable exit code $rc"; exit 1; }
grep -q 'cannot reach' "$out/unreach"

kill -TERM $pid
wait $pid
trap - EXIT
echo "1 passed, 0 failed"
