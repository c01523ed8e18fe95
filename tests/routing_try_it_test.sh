#!/usr/bin/env bash
# docs/routing.md's "Try it" snippet, run as written but for its ports (free
# ones for 50052 and 9464) and its build line (the test's data built it): the
# second request of a shared history goes to the replica that cached it
# (a pick `why="prefix"`, prefill tokens `kind="matched"`). Stops what the
# snippet starts (its process group) however it ends.
set -euo pipefail
out="${TEST_TMPDIR:-$(mktemp -d)}"
fail() { echo "FAIL: $*"; exit 1; }

# The snippet: the fenced sh block after "### Try it".
awk '/^### Try it/ {section = 1} section && /^```sh/ {inside = 1; next}
     inside && /^```/ {exit} inside {print}' docs/routing.md >"$out/snippet.sh"
grep -q 'orchestrator --config=pipelines/local_chat.yaml' "$out/snippet.sh" ||
  fail "no Try it snippet in docs/routing.md: $(cat "$out/snippet.sh")"

free_port() {
  /usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
port=$(free_port)
metrics_port=$(free_port)
# The binaries are the runfiles'; the build line is the test's data.
sed -e '/^bazel build /d' -e 's#bazel-bin/##g' -e "s/50052/$port/g" -e "s/9464/$metrics_port/g" \
  "$out/snippet.sh" >"$out/run.sh"

setsid bash -e "$out/run.sh" >"$out/run.out" 2>"$out/run.err" &
snippet=$!
trap 'kill -KILL -- -$snippet 2>/dev/null || true; wait $snippet 2>/dev/null || true' EXIT
# Its requests take seconds; the whole of it, at most two minutes.
for _ in $(seq 1 1200); do
  kill -0 "$snippet" 2>/dev/null || break
  sleep 0.1
done
kill -0 "$snippet" 2>/dev/null && fail "the snippet ran past two minutes: $(cat "$out/run.out" "$out/run.err")"
wait "$snippet" || fail "the snippet failed: $(cat "$out/run.out" "$out/run.err")"
grep -q '^omnistage_picks_total{.*why="prefix".*} [1-9]' "$out/run.out" ||
  fail "no pick by prefix: $(cat "$out/run.out")"
grep -q '^omnistage_prefix_tokens_total{.*kind="matched".*} [1-9]' "$out/run.out" ||
  fail "no matched prefix tokens: $(cat "$out/run.out")"
echo "docs/routing.md Try it: $(grep -c . "$out/run.out") lines, a prefix pick and matched tokens"
