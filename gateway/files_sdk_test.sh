#!/usr/bin/env bash
# The Files API (docs/openai.md, "Files") with the official OpenAI SDK (npm
# `openai`, unchanged, run with node; sdk_test/files.mjs) through a gateway
# keeping its store in an SQLite file, bearer tokens on:
# - upload, retrieve, list (and page by page), content: the same bytes; another
#   identity gets 404 for each, and an empty list;
# - kill -9 of the gateway, started again on the same file: the file is still
#   there, whole; then deleted;
# - with curl: no token 401, a file over --max_file_bytes 413, an unknown id
#   404 in OpenAI's words, a method not served 405; without --batch_database
#   every Files route is a 404 naming the flag; a database the gateway cannot
#   open stops it at start, naming the flag.
# Needs node and gateway/sdk_test/node_modules (./setup.sh). Stops what it
# starts, by PID.
set -euo pipefail

source gateway/sdk_test/setup.sh
sdk_setup gateway/sdk_test/files.mjs openai
other="files-test-other-$RANDOM$RANDOM"
write_tokens "$out/tokens.yaml" files-test "  - identity: someone-else
    role: user
    token: \"$other\"\n"
export OTHER_TOKEN="$other"
thinker_pipeline "$out/thinker.yaml"
start_orchestrator "$out/thinker.yaml" --tokens_file="$out/tokens.yaml"
pids="$pid"
trap 'kill -KILL $pids 2>/dev/null; wait $pids 2>/dev/null || true' EXIT
db="$out/store/batches.db"
mkdir -p "$out/store"
start_gateway gw --batch_database="$db" --max_file_bytes=100000
base="http://127.0.0.1:$gw_port"

files() {
  "$NODE" "$SDK_DIR/files.mjs" "$base" "$out" "$1" >"$out/$1.json" 2>"$out/$1.err" ||
    fail "files.mjs $1: $(cat "$out/$1.json" "$out/$1.err")"
  echo "sdk $1: $(cat "$out/$1.json")"
}
files upload
id=$(cat "$out/file_id")

# curl CODE_FILE ARGS...: the status code; the body in $out/CODE_FILE.
call() {
  local body="$1"
  shift
  curl -s -o "$out/$body" -w '%{http_code}' "$@"
}
code=$(call noauth.json "$base/v1/files/$id")
[ "$code" = 401 ] || fail "no token: HTTP $code: $(cat "$out/noauth.json")"
head -c 100001 /dev/zero | tr '\0' x >"$out/big.jsonl"
code=$(call big.json "$base/v1/files" -H "Authorization: Bearer $token" -F purpose=batch \
  -F file=@"$out/big.jsonl")
[ "$code" = 413 ] && grep -q '"param":"file"' "$out/big.json" ||
  fail "a file over the cap: HTTP $code: $(cat "$out/big.json")"
code=$(call unknown.json "$base/v1/files/file-nosuch" -H "Authorization: Bearer $token")
[ "$code" = 404 ] && grep -q 'No such File object: file-nosuch' "$out/unknown.json" ||
  fail "an unknown id: HTTP $code: $(cat "$out/unknown.json")"
code=$(call method.json -X DELETE "$base/v1/files/$id/content" -H "Authorization: Bearer $token")
[ "$code" = 405 ] || fail "DELETE of a content: HTTP $code: $(cat "$out/method.json")"
curl -s "$base/metrics" >"$out/metrics.txt"
grep -q 'omnistage_gateway_requests_total{route="/v1/files",status="200"}' "$out/metrics.txt" ||
  fail "the uploads are not counted: $(grep files "$out/metrics.txt")"
echo "curl: 401 without a token, 413 over the cap, 404 for an unknown id, 405 for DELETE of a content"

# Killed, and started again on the same file: what was stored is there.
kill -KILL "$gw"
wait "$gw" 2>/dev/null || true
start_gateway gw2 --batch_database="$db"
base="http://127.0.0.1:$gw_port"
files after

# Without a store, the routes say how to have one.
start_gateway nostore
base="http://127.0.0.1:$gw_port"
code=$(call nostore.json "$base/v1/files" -H "Authorization: Bearer $token")
[ "$code" = 404 ] && grep -q -- '--batch_database' "$out/nostore.json" ||
  fail "without a store: HTTP $code: $(cat "$out/nostore.json")"
# A database it cannot open: the gateway does not start, and says why.
rc=0
timeout 30 gateway/gateway --orchestrator="127.0.0.1:$port" --listen=127.0.0.1:0 \
  --batch_database="$out/no/such/dir/batches.db" >"$out/bad.out" 2>"$out/bad.err" || rc=$?
[ "$rc" != 0 ] && grep -q -- '--batch_database' "$out/bad.err" ||
  fail "an unopenable database: exit $rc: $(cat "$out/bad.err")"
echo "without a store: 404 naming --batch_database; an unopenable one stops the start"
echo "PASS"
