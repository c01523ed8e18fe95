#!/usr/bin/env bash
# /v1/audio/transcriptions with the official OpenAI SDK (npm `openai`,
# unchanged, run with node; sdk_test/transcription.mjs) through the gateway to
# an orchestrator of pipelines/local_listener.yaml (pocketsphinx), configured
# as transcription_test.sh does: espeak-ng's sentences (speak_pcm), encoded by
# Debian's ffmpeg as wav, flac, ogg (opus) and mp3, uploaded with the SDK's
# toFile and heard — each transcript's word error rate printed, over all under
# MAX_WER; a two-sentence upload in every response format (json, text,
# verbose_json with word and segment times, srt, vtt) and streamed
# (transcript.text.delta events, then transcript.text.done); refusals as the
# SDK's typed errors (NotFoundError 404 for an unknown model, BadRequestError
# 400 naming file for one that is not audio, APIError 413 over 25 MiB); and
# nothing left in flight on the orchestrator afterwards.
# Needs node, gateway/sdk_test/node_modules (./setup.sh) and ffmpeg.
# Stops what it starts, by PID.
set -euo pipefail

source gateway/sdk_test/setup.sh
source gateway/transcription_setup.sh
sdk_setup gateway/sdk_test/transcription.mjs openai
# transcription_test.sh's bound: measured 30/96 = 0.31 over these four formats.
MAX_WER=0.38

start_listening
speak_sentences
for spec in "wav -ar 44100 -ac 2" "flac -ar 48000" "ogg -c:a libopus -ar 48000" "mp3 -c:a libmp3lame -ar 22050"; do
  read -r ext flags <<<"$spec"
  for i in 0 1 2; do
    # shellcheck disable=SC2086
    encode "$out/s$i.pcm" "s$i.$ext" $flags
  done
done
# Two sentences, 1.5 s of silence between them: two segments.
encode "$out/two.pcm" two.wav

timeout 50 "$NODE" "$SDK_DIR/transcription.mjs" "http://127.0.0.1:$gw_port" "$out" "$MAX_WER" "${sentences[@]}" \
  >"$out/transcription.out" 2>"$out/transcription.err" ||
  fail "transcription.mjs: $(cat "$out/transcription.out" "$out/transcription.err")"
cat "$out/transcription.out"

# Nothing left in flight on the orchestrator.
expect_idle "$metrics"
echo "PASS"
