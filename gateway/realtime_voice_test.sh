#!/usr/bin/env bash
# Spoken input through the Realtime API: the official SDK's OpenAIRealtimeWS
# through the gateway (HTTPS) to the local voice agent (listener -> thinker ->
# talker -> vocoder, pipelines/local_voice_agent.yaml), with a
# user's token (the gateway learns nothing of the stages from it). Sentences
# spoken by espeak-ng (speak_pcm: 24 kHz PCM16) go in as
# input_audio_buffer.append pieces, commit, response.create (turn_detection
# null), or streamed at real-time pace (server VAD):
# - each turn's transcript (input_audio_transcription) is scored against the
#   sentence: the word error rate over all of them must stay under
#   MAX_WER (docs/openai.md: measured, and the bound);
# - each answer comes back as text (the audio's transcript) and audio;
# - a spoken turn's response cancelled mid-way: 0 requests in flight after;
# - malformed audio events get Realtime errors and the session goes on;
# - with server VAD (the default) sentences streamed at real-time pace between
#   silences are heard where they are, committed and answered by themselves,
#   and speaking over an answer cancels it and truncates its audio.
# Stops what it starts, by PID.
set -euo pipefail
source gateway/sdk_test/setup.sh
sdk_setup gateway/sdk_test/realtime_test.mjs ws
# Measured 8/33 = 0.242 on these sentences (the listener is deterministic:
# the same every run) with espeak-ng's Klatt voice and its channel mean below
# (30/33 = 0.909 with the default voice and the model's own mean); the bound
# leaves two words of margin, for a changed model, not for noise.
MAX_WER=0.31
write_tokens "$out/tokens.yaml" voice-test
deploy/certs/make_dev_certs.sh "$out/certs" >/dev/null

mkdir -p "$out/speech"
i=0
for sentence in "I would like a cup of coffee please." \
  "What time does the train leave tomorrow morning?" \
  "Please call me back when you get home." \
  "Can you tell me the way to the station?"; do
  stage_worker/engines/testing/speak_pcm "$out/speech/$i.pcm" "$sentence" || fail "speak_pcm: '$sentence'"
  echo "$sentence" >"$out/speech/$i.txt"
  i=$((i + 1))
done

# The listener hears the test speaker, told its channel mean.
with_test_speaker pipelines/local_voice_agent.yaml "$out/voice_agent.yaml"
# The thinker at 150 ms a token (2 ms shipped): an answer still streams when the
# user speaks over it (voice_barge_in), as a real model's would.
sed -i 's/engine_params: {batch_size: 64, step_time_us: 2000}/engine_params: {batch_size: 64, step_time_us: 150000}/' \
  "$out/voice_agent.yaml"
grep -q 'step_time_us: 150000' "$out/voice_agent.yaml" || fail "the thinker's step time was not set"
start_orchestrator "$out/voice_agent.yaml" --tokens_file="$out/tokens.yaml"
pids="$pid"
trap 'kill -KILL $pids 2>/dev/null; wait $pids 2>/dev/null || true' EXIT
gateway/gateway --orchestrator="127.0.0.1:$port" --listen=127.0.0.1:0 --model=voice-agent \
  --tls_cert="$out/certs/gateway.crt" --tls_key="$out/certs/gateway.key" \
  >"$out/gw.out" 2>"$out/gw.err" &
pids="$pids $!"
gw_port=$(listened_port gw) || exit 1
base="https://127.0.0.1:$gw_port"
wait_healthy "$base" --cacert "$out/certs/ca.crt"

rt() {  # rt CHECK
  SPEECH_DIR="$out/speech" OMNISTAGE_MODEL=voice-agent NODE_EXTRA_CA_CERTS="$out/certs/ca.crt" \
    "$NODE" "$SDK_DIR/realtime_test.mjs" "$base" "$out" "$1" >"$out/$1.json" 2>"$out/$1.err" ||
    fail "$1: $(cat "$out/$1.json" "$out/$1.err")"
  echo "realtime $1: $(cat "$out/$1.json")"
}

rt voice
wer=$(sed -n 's/.*"wer":\([0-9.]*\).*/\1/p' "$out/voice.json")
awk -v w="$wer" -v max="$MAX_WER" 'BEGIN { exit !(w < max) }' ||
  fail "word error rate $wer is not under $MAX_WER"
rt voice_cancel
wait_idle "the cancel"
rt voice_errors
wait_idle "the malformed events"
rt voice_vad
wait_idle "the detected turns"
rt voice_barge_in
wait_idle "the barge-in"
echo PASS
