#!/bin/bash
# Profiles the orchestrator and its stage worker under one throughput cell of the
# benchmark: perf samples with call graphs, then per process a flame graph (SVG),
# the folded stacks it was drawn from, and the top functions by own time.
#
#   bazel build -c opt //tests/bench:pipeline_benchmark
#   tests/bench/profile.sh 64 /tmp/profile-64        # streams, output folder
#
# Options (environment): ROW (orch1), STEP_US (0), TOKENS (200: tokens per request),
# SECONDS_PROFILED (3), FREQ (499).
# Needs Debian's perf (linux-perf; ./setup.sh --with-benchmark installs it) and root, or
# kernel.perf_event_paranoid <= 1.
# Every process it starts belongs to the benchmark, which stops them by PID.
set -euo pipefail

streams=${1:?usage: profile.sh STREAMS OUTDIR}
out=${2:?usage: profile.sh STREAMS OUTDIR}
row=${ROW:-orch1}
step_us=${STEP_US:-0}
tokens=${TOKENS:-200}
seconds=${SECONDS_PROFILED:-3}
freq=${FREQ:-499}
here=$(cd "$(dirname "$0")" && pwd)
bench=${BENCH:-bazel-bin/tests/bench/pipeline_benchmark}
command -v perf >/dev/null || { echo "profile.sh: perf not found (apt-get install -y linux-perf)" >&2; exit 2; }
[ -x "$bench" ] || { echo "profile.sh: $bench not built (bazel build -c opt //tests/bench:pipeline_benchmark)" >&2; exit 2; }
mkdir -p "$out"

# The cell runs long enough to warm up, be profiled, and end on its own.
"$bench" --scenarios=throughput --rows="$row" --streams="$streams" --step_times_us="$step_us" --tokens="$tokens" \
  --cell_seconds=$((seconds + 6)) >"$out/benchmark.txt" 2>"$out/benchmark.log" &
bench_pid=$!
trap 'kill "$bench_pid" 2>/dev/null || true' EXIT

orchestrator=""
for _ in $(seq 100); do
  orchestrator=$(pgrep -P "$bench_pid" -f /orchestrator || true)
  [ -n "$orchestrator" ] && break
  sleep 0.1
done
[ -n "$orchestrator" ] || { echo "profile.sh: no orchestrator started (see $out/benchmark.log)" >&2; exit 1; }
sleep 4  # Workers up, warm-up request done, the cell under way.
worker=$(pgrep -P "$orchestrator" | head -1)

perf record -q -F "$freq" --call-graph dwarf,32768 -p "$orchestrator" -o "$out/orchestrator.data" \
  -- sleep "$seconds" 2>/dev/null &
perf_orchestrator=$!
perf record -q -F "$freq" --call-graph dwarf,32768 -p "$worker" -o "$out/stage_worker.data" \
  -- sleep "$seconds" 2>/dev/null
wait "$perf_orchestrator"
wait "$bench_pid" || true
trap - EXIT

# perf script prints each sample as a header line (thread name first) and its
# frames innermost first, one per line: "  addr symbol+off (dso)". Folded: the
# thread name, then the frames outermost first, joined by ';', and a count.
fold() {
  perf script -i "$1" -F comm,ip,sym 2>/dev/null | awk '
    function flush() {
      if (n > 0) {
        stack = thread
        for (i = n; i >= 1; i--) stack = stack ";" frames[i]
        count[stack]++
      }
      n = 0
    }
    /^[^ \t]/ { flush(); thread = $1; next }
    /^[ \t]*$/ { flush(); next }
    {
      line = $0
      sub(/^[ \t]*[0-9a-f]+ /, "", line)
      sub(/ \([^()]*\)$/, "", line)
      sub(/\+0x[0-9a-f]+$/, "", line)
      frames[++n] = line
    }
    END { flush(); for (s in count) print s, count[s] }'
}

for process in orchestrator stage_worker; do
  fold "$out/$process.data" >"$out/$process.folded"
  "$here/flamegraph.py" --title "$process, $row, $streams streams, step $step_us us" \
    <"$out/$process.folded" >"$out/$process.svg"
  # (head closes the pipe early: that is not a failure.)
  { perf report -i "$out/$process.data" --no-children --sort sym -g none --stdio 2>/dev/null |
      grep -v '^#' | grep -v '^$' | head -40 >"$out/$process.top.txt"; } || true
done
grep -A3 '^step_us' "$out/benchmark.txt" || true
echo "profile.sh: flame graphs, folded stacks and top functions in $out"
