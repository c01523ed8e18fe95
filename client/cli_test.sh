#!/usr/bin/env bash
# The omni CLI against a real local pipeline: generate (text + WAV), status (a
# table, --json, --watch), utility, abort, speak (stdin streamed into a
# text-to-speech request), listen (that speech streamed into the voice agent),
# and a clear message when nothing answers. Stops what it starts, by PID.
set -euo pipefail

omni=client/omni
source orchestrator/testing/orchestrator_process.sh
# The demo pipeline, its thinker with the test utility div for `utility --args`.
sed 's/engine_params: {batch_size: 64, step_time_us: 2000}/engine_params: {batch_size: 64, step_time_us: 2000, test_utilities: true}/' \
  pipelines/local_omni.yaml >"$out/omni.yaml"
grep -q 'test_utilities: true' "$out/omni.yaml" || fail "the thinker's engine_params changed: update this test"
start_orchestrator "$out/omni.yaml"
# interrupt PID: Ctrl-C to a client in the background; sets rc to its exit code.
interrupt() {
  kill -INT "$1"
  rc=0
  wait "$1" || rc=$?
}

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
grep -q 'no stage 9.*(INVALID_ARGUMENT)' "$out/bad" || fail "bad request message: $(cat "$out/bad")"

# Without --wav the audio is not written anywhere, and the client says so.
(cd "$out" && "$OLDPWD/$omni" generate "$server" --prompt="No file" >/dev/null 2>"$out/nowav") ||
  fail "generate without --wav: $(cat "$out/nowav")"
grep -q 'of audio; not saved (pass --wav=FILE)' "$out/nowav" || fail "no-wav message: $(cat "$out/nowav")"
[ ! -e "$out/omnistage.wav" ] || fail "wrote omnistage.wav unasked"

# Engine parameters per stage (--extra), checked by the engine.
"$omni" generate "$server" --prompt="Short" --modalities=text --extra=0:sentences=1 >/dev/null \
  2>"$out/extra" || fail "--extra: $(cat "$out/extra")"
# A request may opt out of failover (its stages have none here: it just runs).
"$omni" generate "$server" --prompt="Short" --modalities=text --extra=0:sentences=1 \
  --disable_failover >/dev/null 2>"$out/nofailover" ||
  fail "--disable_failover: $(cat "$out/nofailover")"
# A session key (at most 256 bytes, checked before anything is sent).
"$omni" generate "$server" --prompt="Short" --modalities=text --extra=0:sentences=1 \
  --session_key=conversation-7 >/dev/null 2>"$out/session" ||
  fail "--session_key: $(cat "$out/session")"
set +e
"$omni" generate "$server" --prompt="x" --session_key="$(printf 'k%.0s' {1..257})" >/dev/null \
  2>"$out/longsession"
rc=$?
set -e
[ "$rc" -eq 2 ] || fail "a 257-byte --session_key: exit code $rc: $(cat "$out/longsession")"
grep -q -- '--session_key: at most 256 bytes, got 257' "$out/longsession" ||
  fail "long --session_key message: $(cat "$out/longsession")"
# Latency objectives: one the orchestrator takes, one it refuses naming the
# field.
"$omni" generate "$server" --prompt="Short" --modalities=text --extra=0:sentences=1 \
  --first_output_ms=60000 --between_outputs_ms=60000 --criticality=critical >/dev/null \
  2>"$out/objective" || fail "--first_output_ms: $(cat "$out/objective")"
set +e
"$omni" generate "$server" --prompt="Short" --criticality=urgent >/dev/null 2>"$out/criticality"
rc=$?
set -e
[ "$rc" -eq 2 ] || fail "--criticality=urgent: exit code $rc: $(cat "$out/criticality")"
grep -q -- '--criticality: expected critical, standard or sheddable' "$out/criticality" ||
  fail "--criticality message: $(cat "$out/criticality")"
set +e
"$omni" generate "$server" --prompt="Short" --first_output_ms=600001 >/dev/null \
  2>"$out/longobjective"
rc=$?
set -e
[ "$rc" -ne 0 ] || fail "a 600001 ms objective was taken"
grep -q 'objectives.first_output_ms: 600001 ms is more than the 600000 ms' "$out/longobjective" ||
  fail "long objective message: $(cat "$out/longobjective")"
# A prompt that is not UTF-8 is refused before anything is sent (protobuf's
# strings must be UTF-8), without a raw protobuf log line.
set +e
"$omni" generate "$server" --prompt=$'bad \xff byte' >/dev/null 2>"$out/utf8"
rc=$?
set -e
[ "$rc" -eq 2 ] || fail "a non-UTF-8 --prompt: exit code $rc: $(cat "$out/utf8")"
grep -q -- '--prompt is not valid UTF-8 (byte 4 ' "$out/utf8" || fail "non-UTF-8 message: $(cat "$out/utf8")"
grep -q libprotobuf "$out/utf8" && fail "a protobuf log line: $(cat "$out/utf8")"
set +e
"$omni" generate "$server" --prompt="x" --extra=0:colour=red >/dev/null 2>"$out/badextra"
rc=$?
set -e
[ "$rc" -eq 1 ] || fail "bad --extra exit code $rc"
grep -q "colour" "$out/badextra" || fail "bad --extra message: $(cat "$out/badextra")"

# A deadline keeps the audio that arrived.
set +e
"$omni" generate "$server" --prompt="A long one" --extra=0:sentences=100 --max_tokens=0:1000 --timeout_s=1 \
  --wav="$out/partial.wav" >/dev/null 2>"$out/deadline"
rc=$?
set -e
[ "$rc" -eq 1 ] || fail "deadline exit code $rc: $(cat "$out/deadline")"
grep -q 'DEADLINE_EXCEEDED' "$out/deadline" || fail "deadline message: $(cat "$out/deadline")"
grep -q "wrote $out/partial.wav (.*what arrived)" "$out/deadline" || fail "no partial WAV: $(cat "$out/deadline")"
[ "$(head -c 4 "$out/partial.wav")" = "RIFF" ] || fail "partial WAV is no WAV"

# Ctrl-C cancels the request, says so, keeps the audio and exits 130.
"$omni" generate "$server" --prompt="Interrupt me" --extra=0:sentences=100 --max_tokens=0:1000 --request_id=ctrl-c \
  --wav="$out/ctrlc.wav" >/dev/null 2>"$out/ctrlc" &
client=$!
for _ in $(seq 1 100); do grep -q '\[audio' "$out/ctrlc" && break; sleep 0.1; done
interrupt "$client"
[ "$rc" -eq 130 ] || fail "Ctrl-C exit code $rc: $(cat "$out/ctrlc")"
grep -q 'interrupted; cancelled ctrl-c' "$out/ctrlc" || fail "Ctrl-C message: $(cat "$out/ctrlc")"
[ "$(head -c 4 "$out/ctrlc.wav")" = "RIFF" ] || fail "Ctrl-C lost the audio"
# The orchestrator stopped it: the id is free again at once.
"$omni" abort "$server" --ids=ctrl-c >"$out/after" || fail "abort after Ctrl-C"
grep -q 'not found' "$out/after" || fail "ctrl-c still in flight: $(cat "$out/after")"

# status: a table per stage for people...
"$omni" status "$server" >"$out/table" || fail "status"
grep -q '^orchestrator [0-9a-f]*: accepting, 0 in flight, 0 queued$' "$out/table" ||
  fail "status heading: $(cat "$out/table")"
grep -q '^stage 1 talker (engine talker)$' "$out/table" || fail "status lacks talker: $(cat "$out/table")"
grep -q '^  replica  address  *state  load  bound  last error$' "$out/table" ||
  fail "status columns: $(cat "$out/table")"
[ "$(grep -cE '^  [0-9]+  +127\.0\.0\.1:[0-9]+  live  +[0-9-]+/64  [0-9]+$' "$out/table")" -eq 4 ] ||
  fail "status: not 4 live replicas: $(cat "$out/table")"
# ... and the PipelineStatus's JSON for programs.
"$omni" status --json "$server" >"$out/status" || fail "status --json"
grep -q '"name": "talker"' "$out/status" || fail "status lacks talker: $(cat "$out/status")"
grep -q '"alive": true' "$out/status" || fail "no live replica in status"
grep -q '"loadAgeMs"' "$out/status" || fail "status lacks the workers' load: $(cat "$out/status")"
# Alone, the cluster is this orchestrator: it lists itself, reachable.
"$omni" status --cluster --json "$server" >"$out/cluster" || fail "status --cluster"
grep -q '"cluster": true' "$out/cluster" || fail "not a cluster status: $(cat "$out/cluster")"
grep -q '"reachable": true' "$out/cluster" || fail "cluster status lacks this orchestrator"
"$omni" status --cluster "$server" >"$out/cluster_table" || fail "status --cluster (table)"
grep -q '^  [0-9a-f]*  *(this one)  *yes  ' "$out/cluster_table" ||
  fail "cluster table lacks this orchestrator: $(cat "$out/cluster_table")"
# --watch off a terminal: a separator line before each refresh, until Ctrl-C (exit 0).
"$omni" status --watch --interval_s=0.2 "$server" >"$out/watch" 2>"$out/watch_err" &
watcher=$!
for _ in $(seq 1 100); do [ "$(grep -c '^--- ' "$out/watch")" -ge 3 ] && break; sleep 0.1; done
interrupt "$watcher"
[ "$rc" -eq 0 ] || fail "status --watch after Ctrl-C: exit code $rc: $(cat "$out/watch_err")"
[ "$(grep -c '^--- [0-9-]*T[0-9:]*Z$' "$out/watch")" -ge 3 ] || fail "status --watch: $(cat "$out/watch")"
[ "$(grep -c '^stage 0 thinker' "$out/watch")" -ge 3 ] || fail "status --watch tables: $(cat "$out/watch")"
grep -q $'\033' "$out/watch" && fail "status --watch cleared a screen that is no terminal"
set +e
"$omni" status --watch --interval_s=0 "$server" >/dev/null 2>"$out/badinterval"
rc=$?
set -e
[ "$rc" -eq 2 ] || fail "--interval_s=0: exit code $rc"

"$omni" utility "$server" --stage=1 --name=ping >"$out/util" || fail "utility"
[ "$(grep -c '"pong"' "$out/util")" -eq 2 ] || fail "utility on both talkers: $(cat "$out/util")"
"$omni" utility "$server" --stage=0 --name=div --args=6,3 >"$out/div" || fail "utility with args"
# A utility that fails: exit 1, and each replica's error by its code's name.
set +e
"$omni" utility "$server" --stage=0 --name=no_such_utility >"$out/nou" 2>"$out/nou_err"
rc=$?
set -e
[ "$rc" -eq 1 ] || fail "failed utility exit code $rc"
grep -q '^omni: replica 0 (.*): [A-Z_]*: .*no_such_utility' "$out/nou_err" ||
  fail "failed utility message: $(cat "$out/nou_err")"
grep -q '"value": 2$' "$out/div" || fail "div 6,3: $(cat "$out/div")"

"$omni" abort "$server" --ids=nope,also-nope >"$out/abort" || fail "abort"
[ "$(grep -c 'not found' "$out/abort")" -eq 2 ] || fail "abort output: $(cat "$out/abort")"

stop_orchestrator

# speak: stdin into a running text-to-speech request, line by line.
start_orchestrator pipelines/local_tts.yaml
{ echo "Hello there, how are you today."; sleep 0.5; echo "The sea is calm tonight."; } |
  "$omni" speak "$server" --latency --wav="$out/spoken.wav" >"$out/speak_text" 2>"$out/speak_err" ||
  fail "speak exited $?: $(cat "$out/speak_err")"
grep -q 'finished (FINISH_REASON_STOP)' "$out/speak_err" || fail "speak: $(cat "$out/speak_err")"
[ "$(grep -c 'first audio .* ms after its last character' "$out/speak_err")" -eq 2 ] ||
  fail "speak --latency: $(cat "$out/speak_err")"
[ "$(stat -c %s "$out/spoken.wav")" -gt 48044 ] || fail "speak: WAV too small"
# Word by word gives the same samples: chunking changes nothing.
printf 'Hello there, how are you today.\nThe sea is calm tonight.\n' |
  "$omni" speak "$server" --by_word --wav="$out/words.wav" 2>"$out/words_err" >/dev/null ||
  fail "speak --by_word: $(cat "$out/words_err")"
cmp -s "$out/spoken.wav" "$out/words.wav" || fail "speak --by_word changed the audio"
stop_orchestrator

# listen: that WAV streamed into the voice agent (listener -> thinker ->
# talker -> vocoder): what was heard and the answer, each on its line, and the
# answer's audio.
start_orchestrator pipelines/local_voice_agent.yaml
"$omni" listen "$server" --wav="$out/spoken.wav" --pace=0 --reply_wav="$out/reply.wav" \
  >"$out/listen_text" 2>"$out/listen_err" || fail "listen exited $?: $(cat "$out/listen_err")"
grep -q '^listener: [a-z]' "$out/listen_text" || fail "listen: nothing heard: $(cat "$out/listen_text")"
grep -q '^thinker: [A-Z]' "$out/listen_text" || fail "listen: no answer: $(cat "$out/listen_text")"
grep -q 'finished (FINISH_REASON_STOP)' "$out/listen_err" || fail "listen: $(cat "$out/listen_err")"
[ "$(stat -c %s "$out/reply.wav")" -gt 24044 ] || fail "listen: reply WAV too small"
# A file that is no WAV is refused before anything is sent.
set +e
"$omni" listen "$server" --wav="$out/listen_text" >/dev/null 2>"$out/bad_wav"
rc=$?
set -e
[ "$rc" -eq 2 ] || fail "listen with a bad WAV exited $rc"
grep -q 'not a WAV file' "$out/bad_wav" || fail "bad WAV message: $(cat "$out/bad_wav")"
stop_orchestrator

set +e
"$omni" status --server=127.0.0.1:1 >/dev/null 2>"$out/unreach"
rc=$?
set -e
[ "$rc" -eq 4 ] || fail "unreachable exit code $rc"
grep -q 'cannot reach the orchestrator at 127.0.0.1:1' "$out/unreach" || fail "unreachable message"
echo "1 passed, 0 failed"
