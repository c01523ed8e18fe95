#!/bin/bash
# Builds the fuzz targets as libFuzzer binaries (--config=fuzz: clang 14, ASan,
# UBSan) and runs each for a while over a copy of its seed corpus; fails if any
# finds a crash, a broken property (FUZZ_CHECK), a leak or a hang.
#
#   fuzz/run_fuzzers.sh                   # every target, 20 s each (.ci/run: 10 s)
#   fuzz/run_fuzzers.sh 600               # 10 minutes each
#   fuzz/run_fuzzers.sh 3600 pipeline_core_fuzzer worker_fuzzer
#   FUZZ_WORK=$HOME/fuzz-work fuzz/run_fuzzers.sh 3600   # keep the grown corpora
#
# Corpora grow under $FUZZ_WORK/<target>/corpus (a temporary directory unless
# FUZZ_WORK is set, so that a long run can go on where the last one stopped).
# Inputs that fail are kept in fuzz-crashes/<target>/ (in the repository root)
# and listed with the command that replays them. See docs/fuzzing.md.
set -euo pipefail

cd "$(dirname "$0")/.."
seconds="${1:-20}"
shift || true
targets=("$@")
if [[ ${#targets[@]} -eq 0 ]]; then
  targets=(pipeline_config_fuzzer generate_abort_fuzzer pipeline_core_fuzzer worker_fuzzer
           chat_request_fuzzer speech_request_fuzzer transcription_request_fuzzer
           audio_decoder_fuzzer)
fi
if ! [[ "$seconds" =~ ^[0-9]+$ ]] || [[ "$seconds" -lt 1 ]]; then
  echo "usage: $0 [seconds_per_target] [target...]" >&2
  exit 2
fi

# FUZZ_BAZEL_FLAGS: more flags for the build, e.g. --jobs=1.
# shellcheck disable=SC2086
bazel build --config=fuzz ${FUZZ_BAZEL_FLAGS:-} "${targets[@]/#/\/\/fuzz:}"
bin="$(bazel info --config=fuzz bazel-bin 2>/dev/null)/fuzz"

work="${FUZZ_WORK:-}"
if [[ -z "$work" ]]; then
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' EXIT
fi

export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
failed=()
for target in "${targets[@]}"; do
  corpus="$work/$target/corpus"
  artifacts="$work/$target/artifacts"
  mkdir -p "$corpus" "$artifacts"
  cp -n fuzz/corpus/"$target"/* "$corpus"/
  echo "== $target: ${seconds} s over $(find "$corpus" -type f | wc -l) inputs"
  log="$work/$target/log.txt"
  flags=(-max_total_time="$seconds" -timeout=30 -rss_limit_mb=4096 -print_final_stats=1
         -artifact_prefix="$artifacts/")
  # A dictionary of the words the input format knows, where there is one.
  [[ -f fuzz/"$target".dict ]] && flags+=(-dict=fuzz/"$target".dict)
  # -timeout: one input running this long is a hang; -rss_limit_mb: a leak.
  if "$bin/$target" "${flags[@]}" "$corpus" >"$log" 2>&1; then
    grep -E '^stat::(number_of_executed_units|average_exec_per_sec|new_units_added)' "$log" || true
    continue
  fi
  failed+=("$target")
  grep -E 'FUZZ_CHECK|ERROR:|SUMMARY:|broken invariant' "$log" | head -20 || true
  mkdir -p fuzz-crashes/"$target"
  for input in "$artifacts"/*; do
    [[ -e "$input" ]] || continue
    cp "$input" fuzz-crashes/"$target"/
    echo "kept fuzz-crashes/$target/$(basename "$input");" \
      "replay: $bin/$target fuzz-crashes/$target/$(basename "$input")"
  done
  cp "$log" fuzz-crashes/"$target"/log.txt
  echo "the run's log: fuzz-crashes/$target/log.txt"
done

if [[ ${#failed[@]} -gt 0 ]]; then
  echo "FAILED: ${failed[*]}" >&2
  exit 1
fi
echo "every target ran ${seconds} s without a finding"
