#!/usr/bin/env bash
# Every binary's --help lists its own flags with their meaning and default
# (Abseil alone says "No flags matched" for flags outside <program>.cc).
set -uo pipefail
failed=0
check() {  # BINARY ARGS... -- EXPECTED...
  local binary="$1"; shift
  local args=()
  while [ "$1" != "--" ]; do args+=("$1"); shift; done
  shift
  local out
  out="$("$binary" "${args[@]}" 2>&1)"
  if grep -q "No flags matched" <<<"$out"; then
    echo "FAIL: $binary ${args[*]}: No flags matched"; failed=1
  fi
  for want in "$@"; do
    if ! grep -qF -- "$want" <<<"$out"; then
      echo "FAIL: $binary ${args[*]}: no '$want' in:"; echo "$out"; failed=1
    fi
  done
}
check orchestrator/orchestrator --help -- "--config" "--listen" 'default: "127.0.0.1:50051"' \
  "--metrics_listen" "--dns_server" "--stage_worker"
check stage_worker/stage_worker --help -- "--engine" "--engine_params" "--drain_timeout_ms" \
  "default: 30000" "--metrics_listen" "--stall_timeout_ms"
check client/omni --help -- "--server" "--prompt" "--wav" "--ids"
check client/omni generate --help -- "--prompt" "--modalities"
[ "$failed" = 0 ] && echo "PASS: --help lists each binary's own flags"
exit "$failed"
