#!/usr/bin/env bash
# Chat completions that carry speech (input_audio parts), as real processes on
# loopback: the official SDK (sdk_test/chat_audio.mjs) asks the local voice
# agent (listener -> thinker -> talker -> vocoder) a spoken question, whole and
# streamed, and gets text and speech back (the speech read by Debian's
# ffprobe); a gateway whose pipeline's first stage takes only text answers a
# 400 saying it does not hear audio. Nothing is left in flight afterwards.
# Stops what it starts, by PID.
set -euo pipefail
source gateway/sdk_test/setup.sh
sdk_setup gateway/sdk_test/chat_audio.mjs openai

stage_worker/engines/testing/speak_pcm "$out/question.pcm" "What time does the train leave tomorrow morning?" ||
  fail "speak_pcm"
ffmpeg -v error -y -f s16le -ar 24000 -ac 1 -i "$out/question.pcm" "$out/question.wav" || fail "ffmpeg"
# The listener hears the test speaker, told its channel mean.
with_test_speaker pipelines/local_voice_agent.yaml "$out/voice_agent.yaml"
start_orchestrator "$out/voice_agent.yaml" --metrics_listen=127.0.0.1:0
metrics=$(metrics_url)
pids="$pid"
trap 'kill -KILL $pids 2>/dev/null; wait $pids 2>/dev/null || true' EXIT
start_gateway gw --model=voice-agent --text_stage=1 --voice_stage=3
timeout 120 "$NODE" "$SDK_DIR/chat_audio.mjs" "http://127.0.0.1:$gw_port" voice-agent "$out/question.wav" \
  >"$out/sdk.json" 2>"$out/sdk.err" || fail "the SDK's chat with audio: $(cat "$out/sdk.json" "$out/sdk.err")"
echo "answered: $(cat "$out/sdk.json")"
codec=$(ffprobe -v error -show_entries stream=codec_name -of csv=p=0 "$out/question.wav.answer.wav")
[ "$codec" = pcm_s16le ] || fail "the spoken answer reads as '$codec'"

# Nothing left in flight on the orchestrator.
expect_idle "$metrics"
# The one answer with audio (the whole one) timed by the gateway as it wrote it.
heard=$(curl -sf "http://127.0.0.1:$gw_port/metrics" |
  awk '$1 == "omnistage_gateway_time_to_first_audio_seconds_count{route=\"/v1/chat/completions\"}" {print $2}')
[ "$heard" = 1 ] || fail "the gateway timed the first audio of '$heard' chat answers, not 1"

# A text pipeline (its first stage the thinker) says it does not hear audio.
kill -KILL $pids 2>/dev/null
wait $pids 2>/dev/null || true
start_orchestrator pipelines/local_chat.yaml
pids="$pid"
start_gateway text --model=omni-chat
/usr/bin/python3 - "$out/question.wav" >"$out/body.json" <<'PY'
import base64, json, sys
data = base64.b64encode(open(sys.argv[1], "rb").read()).decode()
print(json.dumps({"model": "omni-chat", "messages": [{"role": "user", "content": [
    {"type": "input_audio", "input_audio": {"data": data, "format": "wav"}}]}]}))
PY
code=$(curl -s -o "$out/text.json" -w '%{http_code}' "http://127.0.0.1:$gw_port/v1/chat/completions" \
  -H 'Content-Type: application/json' --data-binary "@$out/body.json")
[ "$code" = 400 ] || fail "audio to a text pipeline: HTTP $code: $(cat "$out/text.json")"
grep -q 'does not hear audio' "$out/text.json" || fail "the 400 does not say why: $(cat "$out/text.json")"
echo "text pipeline: $code $(cat "$out/text.json")"
echo "PASS"
