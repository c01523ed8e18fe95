#!/usr/bin/env bash
# The Python client example against a real local pipeline (orchestrator spawning
# its stage workers from the demo config). Stops what it starts, by PID.
set -euo pipefail

source orchestrator/testing/orchestrator_process.sh
start_orchestrator pipelines/local_omni.yaml

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

# generate_duplex against the text-to-speech pipeline: the first sentence is
# heard while the input is still open (the generator waits for its audio
# before it sends the next one), and the input's end completes the request.
start_orchestrator pipelines/local_tts.yaml
PYTHONPATH=client/python/package /usr/bin/python3 - "127.0.0.1:$port" <<'PY'
import sys, threading
from omnistage import Client, Finished
heard = threading.Event()
def typed():
    yield "Hello there, how are you. "
    assert heard.wait(30), "no audio while the input was open"
    yield "Good bye."
audio = 0
with Client(sys.argv[1]) as client:
    for item in client.generate_duplex(typed(), timeout=60):
        if isinstance(item, Finished):
            assert item.finish_reason == "stop", item
            break
        if item.modality == "audio":
            audio += len(item.audio)
            heard.set()
assert heard.is_set() and audio > 24000, audio
# A bad input item fails in the client, before anything is sent for it.
try:
    with Client(sys.argv[1]) as client:
        list(client.generate_duplex(iter([3.5]), timeout=10))
    raise AssertionError("a float was sent")
except TypeError as e:
    assert "expected str, Audio or a list of ints" in str(e), e
print("duplex ok:", audio, "bytes of audio")
PY
stop_orchestrator
echo "2 passed, 0 failed"
