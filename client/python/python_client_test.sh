#!/usr/bin/env bash
# The Python client example against a real local pipeline (orchestrator spawning
# its stage workers from the demo config). Stops what it starts, by PID.
set -euo pipefail

source tests/orchestrator_process.sh
start_orchestrator orchestrator/configs/local_omni.yaml

PYTHONPATH=client/python/package /usr/bin/python3 client/python/examples/omni_client.py --server "127.0.0.1:$port" \
  --prompt "Hello from Python" --wav "$out/py.wav" >"$out/text" 2>"$out/err"
cat "$out/text" "$out/err"
grep -q '[A-Za-z]' "$out/text" || fail "no text"
grep -q ': stop$' "$out/err" || fail "no stop: $(cat "$out/err")"
/usr/bin/python3 - "$out/py.wav" <<'PY'
import sys, wave
w = wave.open(sys.argv[1])
assert w.getnchannels() == 1 and w.getsampwidth() == 2 and w.getframerate() == 24000, "format"
assert w.getnframes() > 24000 // 10, "too little audio"
print("wav ok:", w.getnframes(), "frames")
PY

# Unreachable server: a clear message and exit code 4.
set +e
PYTHONPATH=client/python/package /usr/bin/python3 client/python/examples/omni_client.py --server 127.0.0.1:1 \
  --prompt x >/dev/null 2>"$out/unreach"
rc=$?
set -e
[ "$rc" -eq 4 ] || fail "unreachable exit code $rc"
grep -q 'cannot reach' "$out/unreach"

stop_orchestrator
echo "1 passed, 0 failed"
