#!/usr/bin/env bash
# The clients against an orchestrator with security on, with certificates and
# tokens from deploy/certs/make_dev_certs.sh (the openssl command line): TLS to
# the orchestrator, bearer tokens, mTLS to the workers it spawns. The omni CLI
# and the Python client connect with their TLS and token options; each refusal
# says what is wrong. Stops what it starts, by PID.
set -euo pipefail

omni=client/omni
source orchestrator/testing/orchestrator_process.sh
c="$out/certs"
deploy/certs/make_dev_certs.sh "$c" >/dev/null
start_orchestrator pipelines/local_sim.yaml \
  --tls_cert="$c/orchestrator.crt" --tls_key="$c/orchestrator.key" \
  --tokens_file="$c/tokens.yaml" --worker_tls_ca="$c/ca.crt" \
  --worker_tls_cert="$c/to-workers.crt" --worker_tls_key="$c/to-workers.key"
tls=(--tls_ca="$c/ca.crt")

# expect RC PATTERN CMD...: runs CMD, checks its exit code and its stderr.
expect() {
  local want="$1" pattern="$2"
  shift 2
  set +e
  "$@" >"$out/stdout" 2>"$out/stderr"
  local rc=$?
  set -e
  [ "$rc" -eq "$want" ] || fail "exit $rc (not $want) from $*: $(cat "$out/stderr")"
  grep -q -- "$pattern" "$out/stderr" || fail "no '$pattern' from $*: $(cat "$out/stderr")"
}

expect 0 'finished (FINISH_REASON_LENGTH)' \
  "$omni" generate "$server" "${tls[@]}" --token_file="$c/user.token" --prompt=hi --max_tokens=0:5
OMNISTAGE_TOKEN="$(cat "$c/admin.token")" "$omni" status "$server" "${tls[@]}" >"$out/status" ||
  fail "admin status"
grep -q 'sim' "$out/status" || fail "status: $(cat "$out/status")"

expect 1 "GetPipelineStatus needs the admin role; 'demo' has the user role (PERMISSION_DENIED)" \
  "$omni" status "$server" "${tls[@]}" --token_file="$c/user.token"
expect 1 "no bearer token.*(UNAUTHENTICATED)" \
  "$omni" generate "$server" "${tls[@]}" --prompt=hi
echo "not-a-token-0123456789" >"$out/wrong.token"
expect 1 "unknown or revoked token (UNAUTHENTICATED)" \
  "$omni" generate "$server" "${tls[@]}" --token_file="$out/wrong.token" --prompt=hi
expect 4 "if it serves TLS, pass --tls_ca" \
  "$omni" generate "$server" --token_file="$c/user.token" --prompt=hi
expect 2 "cannot read $out/nope.token" \
  "$omni" generate "$server" "${tls[@]}" --token_file="$out/nope.token" --prompt=hi

# A token as `$(cat file)` or an editor leaves it — a newline, a CR, spaces
# around it — works; one with a control character inside is refused before
# anything is sent, with a message that names where it came from and shows no
# part of it, on stdout or stderr.
user_token="$(cat "$c/user.token")"
OMNISTAGE_TOKEN="$user_token
" expect 0 'finished (FINISH_REASON_LENGTH)' \
  "$omni" generate "$server" "${tls[@]}" --prompt=hi --max_tokens=0:5
printf ' %s\r\n\n' "$user_token" >"$out/crlf.token"
expect 0 'finished (FINISH_REASON_LENGTH)' \
  "$omni" generate "$server" "${tls[@]}" --token_file="$out/crlf.token" --prompt=hi --max_tokens=0:5
# secret_absent FILE...: no 8 characters of the token appear in the files.
secret_absent() {
  local i
  for i in 0 8 16 24 32 40; do
    [ "${#user_token}" -ge $((i + 8)) ] || break
    ! grep -qF -- "${user_token:$i:8}" "$@" || fail "a piece of the token was printed: $(cat "$@")"
  done
}
broken="${user_token:0:10}$(printf '\001')${user_token:10}"
OMNISTAGE_TOKEN="$broken" expect 2 \
  "omni: \$OMNISTAGE_TOKEN: the bearer token holds a control character (character 11)" \
  "$omni" generate "$server" "${tls[@]}" --prompt=hi
secret_absent "$out/stdout" "$out/stderr"
[ "$(wc -l <"$out/stderr")" -eq 1 ] || fail "more than one line: $(cat "$out/stderr")"
printf '%s\n%s\n' "${user_token:0:12}" "${user_token:12}" >"$out/two-lines.token"
expect 2 "--token_file=$out/two-lines.token: the bearer token holds a control character" \
  "$omni" status "$server" "${tls[@]}" --token_file="$out/two-lines.token"
secret_absent "$out/stdout" "$out/stderr"

# The Python client: the example with its TLS and token options, its owner's
# abort, and an admin's abort of a user's request.
PYTHONPATH=client/python/package /usr/bin/python3 client/python/examples/omni_client.py \
  --server "127.0.0.1:$port" --tls_ca "$c/ca.crt" --token_file "$c/user.token" \
  --prompt "Hello over TLS" >"$out/py" 2>"$out/pyerr" || fail "python example: $(cat "$out/pyerr")"
grep -q ': length$' "$out/pyerr" || fail "python example: $(cat "$out/pyerr")"
PYTHONPATH=client/python/package /usr/bin/python3 - "127.0.0.1:$port" "$c" <<'PY' || fail "python (above)"
import sys
import grpc
import omnistage

server, certs = sys.argv[1], sys.argv[2]
token = lambda name: open(f"{certs}/{name}.token").read().strip()
user = omnistage.Client(server, tls_ca=f"{certs}/ca.crt", token=token("user"))
admin = omnistage.Client(server, tls_ca=f"{certs}/ca.crt", token=token("admin"))
stream = user.generate("a long one", request_id="mine", max_tokens={0: 100000})
assert next(stream).modality == "tokens"
assert user.abort(["mine"]) == {"mine": "aborted"}
assert [i for i in stream if isinstance(i, omnistage.Finished)][0].finish_reason == "abort"
# An operator stops a user's runaway request (docs/security.md: the admin role).
runaway = user.generate("a long one", request_id="runaway", max_tokens={0: 100000})
assert next(runaway).modality == "tokens"
assert admin.abort(["runaway"]) == {"runaway": "aborted"}, "the admin could not abort it"
assert [i for i in runaway if isinstance(i, omnistage.Finished)][0].finish_reason == "abort"
try:
    user.status()
    raise AssertionError("a user read the status")
except grpc.RpcError as error:
    assert error.code() == grpc.StatusCode.PERMISSION_DENIED, error
assert admin.status().stages[0].name == "sim"
# A token with a newline works; one with a control character inside is a
# ValueError that names it and shows no part of it.
newline = omnistage.Client(server, tls_ca=f"{certs}/ca.crt", token=token("user") + "\n")
assert [i for i in newline.generate("hi", max_tokens={0: 3})][-1].finish_reason == "length"
broken = token("user")[:10] + "\x01" + token("user")[10:]
try:
    omnistage.Client(server, tls_ca=f"{certs}/ca.crt", token=broken)
    raise AssertionError("a token with a control character was accepted")
except ValueError as error:
    message = str(error)
    assert "the bearer token holds a control character (character 11)" in message, message
    assert all(broken[i:i + 8] not in message for i in range(len(broken) - 7)), message
print("python ok")
PY
# The example: a token file ending in CRLF works; a control character inside
# is refused (exit 2) without printing any of it.
PYTHONPATH=client/python/package /usr/bin/python3 client/python/examples/omni_client.py \
  --server "127.0.0.1:$port" --tls_ca "$c/ca.crt" --token_file "$out/crlf.token" \
  --prompt "Hello" >"$out/stdout" 2>"$out/stderr" || fail "python example, CRLF: $(cat "$out/stderr")"
set +e
OMNISTAGE_TOKEN="$broken" PYTHONPATH=client/python/package /usr/bin/python3 \
  client/python/examples/omni_client.py --server "127.0.0.1:$port" --tls_ca "$c/ca.crt" \
  --prompt "Hello" >"$out/stdout" 2>"$out/stderr"
rc=$?
set -e
[ "$rc" -eq 2 ] || fail "python example, control character: exit $rc: $(cat "$out/stderr")"
grep -q '^\$OMNISTAGE_TOKEN: the bearer token holds a control character' "$out/stderr" ||
  fail "python example: $(cat "$out/stderr")"
secret_absent "$out/stdout" "$out/stderr"
stop_orchestrator
echo "1 passed, 0 failed"
