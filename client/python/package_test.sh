#!/usr/bin/env bash
# The omnistage Python package installed with pip into a fresh venv that uses
# Debian's grpcio and protobuf (--system-site-packages; nothing is fetched),
# then used against a real local pipeline: generate as an iterator (text,
# audio, one Finished), abort, status, and Unreachable for a dead address.
set -euo pipefail

source orchestrator/testing/orchestrator_process.sh
cp -rL client/python/package "$out/package"
chmod -R u+w "$out/package"
/usr/bin/python3 -m venv --system-site-packages "$out/venv"
"$out/venv/bin/pip" install --quiet --no-index --no-build-isolation "$out/package" ||
  fail "pip install"

start_orchestrator pipelines/local_omni.yaml
cd "$out"  # Away from the source tree: only the installed package can be imported.
"$out/venv/bin/python" - "127.0.0.1:$port" <<'PY' || fail "the package (above)"
import sys
import omnistage

assert "/venv/" in omnistage.__file__, omnistage.__file__
with omnistage.Client(sys.argv[1]) as client:
    items = list(client.generate("Hello from the package", request_id="pkg-1",
                                 extra={0: {"sentences": 1}}))
    finished = items[-1]
    assert isinstance(finished, omnistage.Finished) and finished.ok, finished
    assert finished.request_id == "pkg-1"
    text = "".join(i.text for i in items[:-1] if i.modality == "text")
    audio = b"".join(i.audio for i in items[:-1] if i.modality == "audio")
    assert text.strip() and len(audio) > 4800, (text, len(audio))
    assert client.abort(["pkg-1", "nope"]) == {"pkg-1": "not_found", "nope": "not_found"}
    status = client.status()
    assert [s.name for s in status.stages] == ["thinker", "talker", "vocoder"], status
try:
    omnistage.Client("127.0.0.1:1", connect_timeout=1)
    raise AssertionError("no Unreachable")
except omnistage.Unreachable:
    pass
print("package ok:", len(text), "chars,", len(audio), "audio bytes")
PY
cd - >/dev/null
stop_orchestrator
echo "1 passed, 0 failed"
