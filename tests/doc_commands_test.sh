#!/usr/bin/env bash
# The commands README.md and docs/ show, as docs/commands_run.txt lists them,
# against a running ./demo.sh --serve: each still written so in its document,
# each runnable one exiting 0 with the output it should have
# (tests/doc_commands.py). Stops the demo, by PID, however it ends.
set -euo pipefail
source tests/demo_serve.sh
start_demo 0

# Where the commands run: bazel-bin/client/omni is the real one, pointed at the demo.
work="$out/work"
mkdir -p "$work/bazel-bin/client"
cat >"$work/bazel-bin/client/omni" <<WRAP
#!/usr/bin/env bash
args=()
server=0
for arg in "\$@"; do
  case "\$arg" in
    --server=*) server=1; args+=("--server=127.0.0.1:$grpc_port") ;;
    *) args+=("\$arg") ;;
  esac
done
[ "\$server" = 1 ] || args+=("--server=127.0.0.1:$grpc_port")
exec "$PWD/client/omni" "\${args[@]}"
WRAP
chmod +x "$work/bazel-bin/client/omni"

rc=0
/usr/bin/python3 tests/doc_commands.py docs/commands_run.txt "$work" "$gateway_port" || rc=$?
stop_demo
[ "$rc" -eq 0 ] || fail "documented commands (above)"
