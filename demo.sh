#!/usr/bin/env bash
# The main job: a local omni pipeline (thinker -> talker x2 -> vocoder, all stage
# workers spawned by the orchestrator on loopback), one prompt end to end.
#
#   ./demo.sh ["prompt"]        text streams to the terminal, the same text spoken (espeak-ng)
#                               to omnistage_demo.wav, then everything shuts down
#   ./demo.sh --serve [PORT]    keep the pipeline serving on 127.0.0.1:PORT (default 50051;
#                               0: any free port) for other clients until Ctrl-C, with the
#                               OpenAI-compatible gateway on 127.0.0.1:$GATEWAY_PORT
#                               (default 8000; 0: any), which also speaks text
#                               (/v1/audio/speech) through a second orchestrator, of
#                               pipelines/local_tts.yaml, hears uploads
#                               (/v1/audio/transcriptions) through a third, of
#                               pipelines/local_listener.yaml, and hears speech in chat
#                               completions and Realtime sessions (server VAD) through a
#                               fourth, of pipelines/local_voice_agent.yaml, each on any
#                               free port
#
# It builds first (bazel; the first build takes several minutes). With
# OMNISTAGE_DEMO_BIN=DIR it runs the binaries under DIR (DIR/orchestrator/orchestrator,
# ...) and builds nothing (tests/demo_test.sh). A port that is taken, or anything
# else that keeps the orchestrator or the gateway from starting, stops the demo
# with their own message and a non-zero exit.
#
# Run ./setup.sh once first (the README's first command does both).
set -euo pipefail
cd "$(dirname "$0")"

CONFIG=pipelines/local_omni.yaml
bin="${OMNISTAGE_DEMO_BIN:-}"
if [ -z "$bin" ]; then
  echo "demo: building (the first build takes several minutes)..." >&2
  bazel build --ui_event_filters=-info --show_progress_rate_limit=10 \
    //orchestrator //stage_worker //client:omni //gateway
  bin=bazel-bin
fi

# Each service in a process group of its own (job control): Ctrl-C reaches this
# script alone, which stops them with one SIGTERM each (a second signal would
# stop them at once, without draining).
set -m
logs=$(mktemp -d)
pids=()
stop() {
  local pid
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  pids=()
  rm -rf "$logs"
}
trap stop EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# start NAME COMMAND...: runs COMMAND (its stdout in $logs/NAME.out, its stderr
# here, or with quiet=1 in $logs/NAME.err) and waits until it says "listening
# port=N"; sets $pid and $port. If it exits first (a taken port, a bad config),
# says so (with quiet=1 showing its stderr) and exits with its code.
quiet=0
start() {
  local name="$1"
  shift
  # There before the first read below: the service opens it only once it runs.
  : >"$logs/$name.out"
  if [ "$quiet" = 1 ]; then
    "$@" >"$logs/$name.out" 2>"$logs/$name.err" &
  else
    "$@" >"$logs/$name.out" &
  fi
  pid=$!
  pids+=("$pid")
  local rc
  for _ in $(seq 1 1200); do
    port=$(sed -n 's/.*listening port=\([0-9]*\).*/\1/p' "$logs/$name.out")
    [ -n "$port" ] && return 0
    if ! kill -0 "$pid" 2>/dev/null; then
      rc=0
      wait "$pid" || rc=$?
      if [ "$quiet" = 1 ]; then
        echo "demo: the $name did not start (exit code $rc):" >&2
        cat "$logs/$name.err" >&2
      else
        echo "demo: the $name did not start (exit code $rc): see its message above" >&2
      fi
      exit $((rc == 0 ? 1 : rc))
    fi
    sleep 0.1
  done
  echo "demo: the $name did not report its port within 120 s" >&2
  exit 1
}

if [ "${1:-}" = "--serve" ]; then
  # The orchestrator says "listening" once every stage's replicas are up.
  start orchestrator "$bin/orchestrator/orchestrator" --config="$CONFIG" \
    --listen="127.0.0.1:${2:-50051}" --stage_worker="$bin/stage_worker/stage_worker"
  orchestrator=$pid grpc_port=$port
  # Text to speech (talker -> vocoder) for /v1/audio/speech.
  start speech "$bin/orchestrator/orchestrator" --config=pipelines/local_tts.yaml \
    --listen=127.0.0.1:0 --stage_worker="$bin/stage_worker/stage_worker"
  speech=$pid speech_port=$port
  # Speech to text (listener) for /v1/audio/transcriptions.
  start listener "$bin/orchestrator/orchestrator" --config=pipelines/local_listener.yaml \
    --listen=127.0.0.1:0 --stage_worker="$bin/stage_worker/stage_worker"
  listener=$pid listener_port=$port
  # The voice agent (listener -> thinker -> talker -> vocoder) for chat
  # completions with audio in and Realtime sessions.
  start hearing "$bin/orchestrator/orchestrator" --config=pipelines/local_voice_agent.yaml \
    --listen=127.0.0.1:0 --stage_worker="$bin/stage_worker/stage_worker"
  hearing=$pid hearing_port=$port
  start gateway "$bin/gateway/gateway" --orchestrator="127.0.0.1:$grpc_port" \
    --listen="127.0.0.1:${GATEWAY_PORT:-8000}" --model=omni-demo --voice_stage=2 \
    --speech_orchestrator="127.0.0.1:$speech_port" \
    --transcription_orchestrator="127.0.0.1:$listener_port" \
    --hearing_orchestrator="127.0.0.1:$hearing_port" --hearing_text_stage=1 --hearing_voice_stage=3
  gateway=$pid gateway_port=$port
  # Ready when it answers a chat completion (asking /health before the gateway
  # reached the orchestrator gets a 503, which the gateway logs as a warning).
  for _ in $(seq 1 100); do
    curl -sf "http://127.0.0.1:$gateway_port/v1/chat/completions" -o /dev/null \
      -d '{"model": "omni-demo", "messages": [{"role": "user", "content": "ready?"}], "max_tokens": 1}' &&
      break
    sleep 0.2
  done
  cat >&2 <<TRY
demo: serving $CONFIG on 127.0.0.1:$grpc_port (gRPC) and 127.0.0.1:$gateway_port (OpenAI API); Ctrl-C stops
demo: try:
  bazel-bin/client/omni generate --server=127.0.0.1:$grpc_port --prompt='Hello'
  bazel-bin/client/omni status --server=127.0.0.1:$grpc_port
  curl -N http://127.0.0.1:$gateway_port/v1/chat/completions -d '{"model": "omni-demo", "messages": [{"role": "user", "content": "Hello"}], "stream": true}'
  curl http://127.0.0.1:$gateway_port/v1/audio/speech -d '{"model": "tts-1", "input": "Hello there.", "voice": "alloy"}' -o hello.mp3
  curl http://127.0.0.1:$gateway_port/v1/audio/transcriptions -F file=@hello.mp3 -F model=whisper-1
  node gateway/sdk_test/chat.mjs --base=http://127.0.0.1:$gateway_port --wav=hello.wav "Hello"
  curl http://127.0.0.1:$gateway_port/v1/audio/speech -d '{"model": "tts-1", "input": "What is the sea like?", "voice": "alloy", "response_format": "pcm"}' -o question.pcm
  node gateway/sdk_test/talk.mjs --base=http://127.0.0.1:$gateway_port question.pcm
TRY
  # Until Ctrl-C, or until either of them ends.
  rc=0
  wait -n "$orchestrator" "$speech" "$listener" "$hearing" "$gateway" || rc=$?
  echo "demo: an orchestrator or the gateway ended (exit code $rc); stopping" >&2
  exit $((rc == 0 ? 1 : rc))
fi

prompt="${1:-Tell me something about the sea.}"
wav="${OMNISTAGE_WAV:-omnistage_demo.wav}"
quiet=1
start orchestrator "$bin/orchestrator/orchestrator" --config="$CONFIG" --listen=127.0.0.1:0 \
  --stage_worker="$bin/stage_worker/stage_worker"
orchestrator=$pid

echo "demo: pipeline up on 127.0.0.1:$port; prompt: $prompt" >&2
status=0
"$bin/client/omni" generate --server="127.0.0.1:$port" --prompt="$prompt" --wav="$wav" || status=$?

stop
trap - EXIT
# Every stage worker was the orchestrator's child and must be gone with it.
left="stage_worker.*--instance_id=[a-z0-9_-]*-[0-9]+-$orchestrator-[0-9]+"
if pgrep -f "$left" >/dev/null; then
  echo "demo: stage workers were left behind:" >&2
  pgrep -af "$left" >&2
  exit 1
fi
[ "$status" -eq 0 ] && echo "demo: done; play the audio with: aplay $wav" >&2
exit "$status"
