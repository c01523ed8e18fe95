#!/usr/bin/env bash
# The Batch API (docs/openai.md, "Batches") with the official OpenAI SDK (npm
# `openai`, unchanged, run with node; sdk_test/batches.mjs) through a gateway
# with a store and its own token (role gateway), bearer tokens on, in front of
# the demo pipeline:
# - a batch of chat completions (text, and text with audio) runs to completed:
#   every custom_id once, each the answer an interactive call with the same
#   seed gets; a line whose body cannot run fails alone, in the error file;
#   another identity sees none of it; input files that cannot run are refused
#   at creation with OpenAI's codes;
# - a batch cancelled mid-way ends cancelled, every line once in one file;
# - omni batches (an admin's token) lists a batch running with its counts; a
#   user's token may not read every owner's;
# - kill -9 of the gateway mid-batch, started again on the same database: the
#   batch completes, every line exactly once;
# - kill -9 of the orchestrator mid-batch, started again on the same port:
#   the lines it failed are tried again, every line exactly once;
# - a batch of speech lines (a gateway with a speech pipeline): each result's
#   audio is what an interactive call gets, and ffprobe decodes it.
# Needs node, gateway/sdk_test/node_modules (./setup.sh) and ffprobe. Stops
# what it starts, by PID.
set -euo pipefail

source gateway/sdk_test/setup.sh
sdk_setup gateway/sdk_test/batches.mjs openai
other="batch-test-other-$RANDOM$RANDOM"
runner="batch-test-gateway-$RANDOM$RANDOM"
write_tokens "$out/tokens.yaml" batch-test "  - identity: someone-else
    role: user
    token: \"$other\"
  - identity: batch-gateway
    role: gateway
    token: \"$runner\"\n"
export OTHER_TOKEN="$other"
echo "$runner" >"$out/gateway.token"
# A port of its own, to start the orchestrator again on after a kill.
orch_port=$(/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
start_orchestrator pipelines/local_omni.yaml --tokens_file="$out/tokens.yaml" \
  --listen="127.0.0.1:$orch_port"
pids="$pid"
trap 'kill -KILL $pids 2>/dev/null; wait $pids 2>/dev/null || true' EXIT
db="$out/batches.db"
gateway_flags=(--batch_database="$db" --batch_token_file="$out/gateway.token"
  --batch_concurrency=2)
start_gateway gw "${gateway_flags[@]}"
base="http://127.0.0.1:$gw_port"

batches() {
  "$NODE" "$SDK_DIR/batches.mjs" "$base" "$out" "$@" >"$out/$1.json" 2>"$out/$1.err" ||
    fail "batches.mjs $1: $(cat "$out/$1.json" "$out/$1.err")"
  echo "sdk $1: $(cat "$out/$1.json")"
}
batches run
batches cancel
curl -s "$base/metrics" >"$out/metrics.txt"
grep -q '^omnistage_gateway_batch_lines_total{outcome="completed"} [1-9]' "$out/metrics.txt" &&
  grep -q '^omnistage_gateway_batches_total{status="cancelled"} 1' "$out/metrics.txt" ||
  fail "batch metrics: $(grep batch "$out/metrics.txt")"

# The gateway killed mid-batch, and started again on its database. While
# it runs, omni batches (an admin's token) lists it with its counts.
batches start 100
running=$(cat "$out/batch_id")
OMNISTAGE_TOKEN="$admin" "$omni" batches --gateway="$base" >"$out/omni-batches.txt" \
  2>"$out/omni-batches.err" || fail "omni batches: $(cat "$out/omni-batches.err")"
grep -q "^$running  *sdk-user  */v1/chat/completions  *in_progress  *[0-9]*/100 " \
  "$out/omni-batches.txt" || fail "omni batches: $(cat "$out/omni-batches.txt")"
code=$(curl -s -o "$out/console-user.json" -w '%{http_code}' "$base/console/status" \
  -H "Authorization: Bearer $token")
[ "$code" = 403 ] || fail "a user's token read every owner's batches: HTTP $code"
echo "omni batches: $(grep "$running" "$out/omni-batches.txt")"
kill -KILL "$gw"
wait "$gw" 2>/dev/null || true
start_gateway gw2 "${gateway_flags[@]}"
base="http://127.0.0.1:$gw_port"
batches finish
grep -q 'line(s) running when the gateway stopped run again' "$out/gw2.err" ||
  fail "the restarted gateway put no line back: $(cat "$out/gw2.err")"

# The orchestrator killed mid-batch (its workers with it), and started again.
batches start 100
kill -KILL "$pid"
wait "$pid" 2>/dev/null || true
start_orchestrator pipelines/local_omni.yaml --tokens_file="$out/tokens.yaml" \
  --listen="127.0.0.1:$orch_port"
pids="$pids $pid"
batches finish
grep -q 'omnistage_gateway_batch_lines_total{outcome="retried"} [1-9]' <(curl -s "$base/metrics") ||
  fail "no line was tried again after the orchestrator's kill"

# Speech lines, on a gateway that serves speech (a second pipeline, the same
# tokens): the audio of each result decodes as its format.
main_port="$port"
start_orchestrator pipelines/local_tts.yaml --tokens_file="$out/tokens.yaml"
pids="$pids $pid"
tts_port="$port"
port="$main_port"
start_gateway speech "${gateway_flags[@]}" --batch_database="$out/speech.db" \
  --speech_orchestrator="127.0.0.1:$tts_port"
base="http://127.0.0.1:$gw_port"
batches speech
for spec in "s-0 wav pcm_s16le" "s-1 mp3 mp3"; do
  read -r id format codec <<<"$spec"
  got=$(ffprobe -v error -show_entries stream=codec_name -of csv=p=0 "$out/speech-$id.$format")
  [ "$got" = "$codec" ] || fail "speech $id: ffprobe reads '$got', not $codec"
done
echo "speech: the batch's wav and mp3 decode"
echo "PASS"
