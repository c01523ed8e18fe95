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
  "--metrics_listen" "--dns_server" "--stage_worker" "--peer_listen" "--peer_tls_ca" \
  "--access_log" "default: true"
check stage_worker/stage_worker --help -- "--engine" "--engine_params" "--drain_timeout_ms" \
  "default: 30000" "--metrics_listen" "--stall_timeout_ms"
check client/omni --help -- "--server" "--prompt" "--wav" "--ids" "--seed" "--cluster"
check gateway/gateway --help -- "--listen" 'default: "127.0.0.1:8000"' "--orchestrator" \
  "--model" "--orchestrator_tls_ca" "--max_connections" "--max_connections_per_address" \
  "--request_read_timeout_ms" "default: 20000" "--max_header_bytes" "--max_headers"
check client/omni generate --help -- "--prompt" "--modalities"
# A bad flag is bad usage: exit code 2 and one line naming it.
bad() {  # EXPECTED_MESSAGE BINARY ARGS...
  local want="$1"; shift
  local out rc
  out="$("$@" 2>&1)"; rc=$?
  if [ "$rc" -ne 2 ] || ! grep -qF -- "$want" <<<"$out"; then
    echo "FAIL: $* exited $rc with: $out"; failed=1
  fi
}
bad "orchestrator: unknown flag --colour (see --help)" orchestrator/orchestrator --colour=red
bad "stage_worker: --stage_id:" stage_worker/stage_worker --stage_id=abc
bad "omni: unknown flag --promt" client/omni generate --promt=hi
[ "$failed" = 0 ] && echo "PASS: --help lists each binary's own flags; bad flags exit 2"
exit "$failed"
