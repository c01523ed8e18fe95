#!/usr/bin/env bash
# The main job: a local omni pipeline (thinker -> talker x2 -> vocoder, all stage
# workers spawned by the orchestrator on loopback), one prompt end to end.
#
#   ./demo.sh ["prompt"]        text streams to the terminal, the same text spoken (espeak-ng)
#                               to omnistage_demo.wav, then everything shuts down
#   ./demo.sh --serve [PORT]    keep the pipeline serving on 127.0.0.1:PORT (default 50051)
#                               for other clients until Ctrl-C, with the OpenAI-compatible
#                               gateway on 127.0.0.1:$GATEWAY_PORT (default 8000)
#
# Run ./setup.sh once first (the README's first command does both).
set -euo pipefail
cd "$(dirname "$0")"

CONFIG=orchestrator/configs/local_omni.yaml
bazel build --ui_event_filters=-info,-progress //orchestrator //stage_worker //client:omni \
  //gateway

if [ "${1:-}" = "--serve" ]; then
  port="${2:-50051}"
  gateway_port="${GATEWAY_PORT:-8000}"
  bazel-bin/orchestrator/orchestrator --config="$CONFIG" --listen="127.0.0.1:$port" &
  orchestrator=$!
  bazel-bin/gateway/gateway --orchestrator="127.0.0.1:$port" \
    --listen="127.0.0.1:$gateway_port" --model=omni-demo --voice_stage=2 &
  gateway=$!
  # Ctrl-C (or SIGTERM) stops both; the orchestrator drains first.
  trap 'kill -TERM $gateway $orchestrator 2>/dev/null; wait $gateway $orchestrator 2>/dev/null' \
    EXIT INT TERM
  for _ in $(seq 1 100); do
    curl -sf "http://127.0.0.1:$gateway_port/health" >/dev/null 2>&1 && break
    sleep 0.2
  done
  cat >&2 <<TRY
demo: serving $CONFIG on 127.0.0.1:$port (gRPC) and 127.0.0.1:$gateway_port (OpenAI API); Ctrl-C stops
demo: try:
  bazel-bin/client/omni generate --server=127.0.0.1:$port --prompt='Hello'
  curl -N http://127.0.0.1:$gateway_port/v1/chat/completions -d '{"model": "omni-demo", "messages": [{"role": "user", "content": "Hello"}], "stream": true}'
  node gateway/sdk_test/chat.mjs --base=http://127.0.0.1:$gateway_port --wav=hello.wav "Hello"
TRY
  wait "$orchestrator"
  exit
fi

prompt="${1:-Tell me something about the sea.}"
wav="${OMNISTAGE_WAV:-omnistage_demo.wav}"
logs=$(mktemp -d)
bazel-bin/orchestrator/orchestrator --config="$CONFIG" --listen=127.0.0.1:0 \
  >"$logs/stdout" 2>"$logs/stderr" &
orchestrator=$!

stop() {
  if kill -0 "$orchestrator" 2>/dev/null; then
    kill -TERM "$orchestrator"
    wait "$orchestrator" || true
  fi
}
trap stop EXIT

for _ in $(seq 1 600); do
  grep -q 'listening port=' "$logs/stdout" && break
  if ! kill -0 "$orchestrator" 2>/dev/null; then
    echo "demo: the orchestrator did not start:" >&2
    cat "$logs/stderr" >&2
    exit 1
  fi
  sleep 0.1
done
port=$(sed -n 's/.*listening port=\([0-9]*\).*/\1/p' "$logs/stdout")
if [ -z "$port" ]; then
  echo "demo: the orchestrator did not report its port within 60 s" >&2
  cat "$logs/stderr" >&2
  exit 1
fi

echo "demo: pipeline up on 127.0.0.1:$port; prompt: $prompt" >&2
status=0
bazel-bin/client/omni generate --server="127.0.0.1:$port" --prompt="$prompt" --wav="$wav" || status=$?

stop
trap - EXIT
# Every stage worker was the orchestrator's child and must be gone with it.
left="stage_worker.*--instance_id=[a-z0-9_-]*-[0-9]+-$orchestrator-[0-9]+"
if pgrep -f "$left" >/dev/null; then
  echo "demo: stage workers were left behind:" >&2
  pgrep -af "$left" >&2
  exit 1
fi
rm -rf "$logs"
[ "$status" -eq 0 ] && echo "demo: done; play the audio with: aplay $wav" >&2
exit "$status"
