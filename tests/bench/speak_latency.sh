#!/usr/bin/env bash
# Speak-as-you-type latency: how long after a sentence's last character its
# first audio arrives, through `omni speak` against the shipped text-to-speech
# pipeline (pipelines/local_tts.yaml: talker -> vocoder), with the
# next sentence still to be typed. Prints each run's figures and their spread.
#
#   bazel run //tests/bench:speak_latency -- [runs] [pause_s]
#
# Each run types the same 6 sentences, one line each, `pause_s` (default 1.5)
# apart, as a person would: slower than their speech is made, so the first
# audio after a line is that line's (docs/benchmarks.md, "Speak as you type").
set -euo pipefail
cd "${RUNFILES_DIR:-$0.runfiles}/omnistage" 2>/dev/null || cd "$(dirname "$0")/../.."
runs="${1:-3}"
pause="${2:-1.5}"
source orchestrator/testing/orchestrator_process.sh
start_orchestrator pipelines/local_tts.yaml

sentences=(
  "Hello there, how are you today."
  "The sea is calm tonight."
  "Every path leads somewhere new."
  "Please tell me a story about the mountains."
  "I will be back in a minute."
  "Good bye, and thank you."
)
all=()
for run in $(seq 1 "$runs"); do
  { for s in "${sentences[@]}"; do echo "$s"; sleep "$pause"; done; } |
    client/omni speak "$server" --latency >/dev/null 2>"$out/run$run.err" ||
    fail "speak: $(cat "$out/run$run.err")"
  mapfile -t ms < <(sed -n 's/.*first audio \([0-9.]*\) ms after.*/\1/p' "$out/run$run.err")
  [ "${#ms[@]}" -eq "${#sentences[@]}" ] || fail "run $run: $(cat "$out/run$run.err")"
  sorted=$(printf '%s\n' "${ms[@]}" | sort -n)
  echo "run $run: per sentence ${ms[*]} ms; median $(echo "$sorted" | sed -n 3,4p | paste -sd' ') ms, max $(echo "$sorted" | tail -1) ms"
  all+=("${ms[@]}")
done
sorted=$(printf '%s\n' "${all[@]}" | sort -n)
n=${#all[@]}
echo "all $n sentences: min $(echo "$sorted" | head -1) ms, median $(echo "$sorted" | sed -n "$(( (n + 1) / 2 ))p") ms, p90 $(echo "$sorted" | sed -n "$(( (n * 9 + 9) / 10 ))p") ms, max $(echo "$sorted" | tail -1) ms"
stop_orchestrator
