# Sourced by the gateway's SDK tests (openai_sdk_test.sh, realtime_sdk_test.sh,
# realtime_voice_test.sh): the orchestrator helpers, node and the npm packages
# checked, and a tokens file with a user's and an admin's token.
#
#   source gateway/sdk_test/setup.sh
#   sdk_setup gateway/sdk_test/realtime_test.mjs ws   # sets SDK_DIR, NODE, omni
#   write_tokens "$out/tokens.yaml" realtime-test      # sets token, admin
#   write_tokens FILE PREFIX "  - identity: ...\n"      # more entries after them
source orchestrator/testing/orchestrator_process.sh
omni=client/omni

# sdk_setup SCRIPT MODULE: the SDK's directory is SCRIPT's real one (the
# runfiles tree is symlinks; node finds node_modules next to the real file),
# where MODULE must be installed (./setup.sh runs npm ci there).
sdk_setup() {
  SDK_DIR="$(dirname "$(readlink -f "$1")")"
  NODE="${NODE:-node}"
  command -v "$NODE" >/dev/null || fail "node not found (set NODE=/path/to/node)"
  [ -d "$SDK_DIR/node_modules/$2" ] ||
    fail "$SDK_DIR/node_modules/$2 is missing: run ./setup.sh at the repository root"
}

# write_tokens FILE PREFIX [MORE_YAML]: a user's token ($token, exported as
# OMNISTAGE_TOKEN) and an admin's ($admin), random.
write_tokens() {
  token="$2-token-$RANDOM$RANDOM"
  admin="$2-admin-$RANDOM$RANDOM"
  printf 'tokens:\n  - identity: sdk-user\n    role: user\n    token: "%s"\n  - identity: ops\n    role: admin\n    token: "%s"\n%b' \
    "$token" "$admin" "${3:-}" >"$1"
  export OMNISTAGE_TOKEN="$token"
}

# in_flight: the requests the orchestrator ($server) has in flight (admin).
in_flight() { OMNISTAGE_TOKEN="$admin" "$omni" status --json "$server" 2>/dev/null | sed -n 's/.*"inFlightRequests": \([0-9]*\).*/\1/p'; }

# wait_idle WHAT: fails unless the orchestrator has 0 in flight within 5 s.
wait_idle() {
  for _ in $(seq 1 50); do
    [ "$(in_flight)" = 0 ] && return 0
    sleep 0.1
  done
  fail "after $1 $(in_flight) request(s) still in flight"
}
