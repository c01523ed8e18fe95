#!/usr/bin/env bash
# The omni CLI against a real local pipeline: generate (text + WAV), status,
# utility, abort, and a clear message when nothing answers. Stops what it
# starts, by PID.
set -euo pipefail

omni=client/omni
source tests/orchestrator_process.sh
start_orchestrator orchestrator/configs/local_omni.yaml

"$omni" generate "$server" --prompt="Hello CLI" --wav="$out/a.wav" >"$out/text" 2>"$out/err" ||
  fail "generate exited $?: $(cat "$out/err")"
grep -q '[A-Za-z]' "$out/text" || fail "no text"
grep -q 'finished (FINISH_REASON_STOP)' "$out/err" || fail "no STOP: $(cat "$out/err")"
[ "$(head -c 4 "$out/a.wav")" = "RIFF" ] || fail "no WAV"
[ "$(stat -c %s "$out/a.wav")" -gt 4844 ] || fail "WAV too small"

# Text only: no audio, so no WAV.
"$omni" generate "$server" --prompt="Only text" --modalities=text --wav="$out/b.wav" \
  >"$out/text2" 2>"$out/err2" || fail "text-only generate: $(cat "$out/err2")"
[ ! -e "$out/b.wav" ] || fail "text-only request wrote audio"

# A bad request gets the server's message.
set +e
"$omni" generate "$server" --prompt="x" --modalities=text --max_tokens=9:5 >/dev/null 2>"$out/bad"
rc=$?
set -e
[ "$rc" -eq 1 ] || fail "bad request exit code $rc"
grep -q 'no stage 9' "$out/bad" || fail "bad request message: $(cat "$out/bad")"

"$omni" status "$server" >"$out/status" || fail "status"
grep -q '"name": "talker"' "$out/status" || fail "status lacks talker: $(cat "$out/status")"
grep -q '"alive": true' "$out/status" || fail "no live replica in status"

"$omni" utility "$server" --stage=1 --name=ping >"$out/util" || fail "utility"
[ "$(grep -c '"pong"' "$out/util")" -eq 2 ] || fail "utility on both talkers: $(cat "$out/util")"

"$omni" abort "$server" --ids=nope,also-nope >"$out/abort" || fail "abort"
[ "$(grep -c 'not found' "$out/abort")" -eq 2 ] || fail "abort output: $(cat "$out/abort")"

stop_orchestrator

set +e
"$omni" status --server=127.0.0.1:1 >/dev/null 2>"$out/unreach"
rc=$?
set -e
[ "$rc" -eq 4 ] || fail "unreachable exit code $rc"
grep -q 'cannot reach the orchestrator at 127.0.0.1:1' "$out/unreach" || fail "unreachable message"
echo "1 passed, 0 failed"
