#!/usr/bin/env bash
# Runs the `sim` overlay's pods under Debian's podman, and streams one prompt
# through them: the images built here (deploy/images/build.sh), the manifests
# rendered with kustomize, `podman kube play` on a network of its
# own, and a DNS server (dnsmasq on that network's gateway) answering the
# headless Service names (the stages', omnistage-orchestrator-peers, by which
# the orchestrator replicas find each other, and omnistage-orchestrators, over
# which the OpenAI-compatible gateway's pods spread their calls; for_podman.py
# points the gateway's gRPC at this DNS server) with the pods' addresses — the
# part of a cluster podman does not play. Secure as the manifests are: the Secrets they mount come
# from deploy/certs/make_dev_certs.sh (directories of this host under podman),
# the client speaks TLS with a token, the orchestrators mTLS to the workers and
# to each other, the gateway TLS to the orchestrators with the client's bearer
# token passed on, the gateway HTTPS to its clients.
#
#   deploy/podman/run_sim.sh                       # prompt "Tell me about the sea."
#   deploy/podman/run_sim.sh "Hello there" --wav=/tmp/hello.wav
#   SKIP_IMAGES=1 deploy/podman/run_sim.sh         # reuse images already built
#
# Prints the pods, an orchestrator's view of its replicas and of the other
# orchestrators (once every one is reachable on its peer port), the streamed
# text and the WAV it saved, a chat completion through a gateway pod (HTTP,
# with the admin token as the bearer), then aborts a request held by one
# orchestrator through another (the forwarded Abort). Everything it starts
# (pods, network, dnsmasq, clients) is stopped when it exits, also on
# failure. Needs root, podman, runc, catatonit, dnsmasq and python3-yaml
# (./setup.sh --with-podman installs them) and the kustomize ./setup.sh
# installs (deploy/kubernetes/kustomize.sh).
set -euo pipefail
cd "$(dirname "$(readlink -f "$0")")/../.."

prompt="Tell me about the sea."
wav="$PWD/omnistage_podman.wav"
for arg in "$@"; do
  case "$arg" in
    --wav=*) wav="${arg#--wav=}" ;;
    -*) echo "usage: $0 [PROMPT] [--wav=FILE]" >&2; exit 2 ;;
    *) prompt="$arg" ;;
  esac
done

network=omnistage-sim
subnet=10.89.77.0/24
gateway=10.89.77.1
work="$(mktemp -d)"
dns_pid=""
gen_pid=""

# On failure, every container's last lines (the orchestrator's, the workers',
# the gateways'), then the DNS server's.
dump_logs() {
  local container
  for container in $(podman ps -a --format '{{.Names}}' | grep '^omnistage-' | grep -v -- '-infra$' | sort); do
    echo "---- log of $container (last 80 lines)" >&2
    podman logs --tail 80 "$container" >&2 2>&1
  done
  [ -f "$work/dnsmasq.log" ] && { echo "---- dnsmasq" >&2; tail -n 20 "$work/dnsmasq.log" >&2; }
}

cleanup() {
  local rc=$?
  set +e
  [ "$rc" -ne 0 ] && [ -f "$work/play.yaml" ] && dump_logs
  [ -n "$gen_pid" ] && kill "$gen_pid" 2>/dev/null && wait "$gen_pid" 2>/dev/null
  [ -f "$work/play.yaml" ] && podman kube down "$work/play.yaml" >/dev/null 2>&1
  [ -n "$dns_pid" ] && kill "$dns_pid" 2>/dev/null && wait "$dns_pid" 2>/dev/null
  podman network rm -f "$network" >/dev/null 2>&1
  rm -rf "$work"
}
trap cleanup EXIT

# podman settings for this script only: runc with cgroupfs (crun refuses the
# hybrid cgroup layout of some hosts), and file/process limits no higher than
# this shell's, which a container may set without CAP_SYS_RESOURCE.
cat >"$work/containers.conf" <<CONF
[containers]
default_ulimits = ["nofile=4096:4096", "nproc=4096:4096"]
[engine]
cgroup_manager = "cgroupfs"
runtime = "runc"
CONF
export CONTAINERS_CONF="$work/containers.conf"

if [ -z "${SKIP_IMAGES:-}" ]; then deploy/images/build.sh; fi
# The rendered manifests run three images; an older build.sh made two.
for image in orchestrator stage-worker gateway; do
  podman image exists "omnistage/$image:dev" ||
    { echo "run_sim: image omnistage/$image:dev is missing: run deploy/images/build.sh (or drop SKIP_IMAGES)" >&2; exit 1; }
done
bazel build //client:omni >/dev/null 2>&1 || bazel build //client:omni

deploy/kubernetes/kustomize.sh build deploy/kubernetes/overlays/sim >"$work/rendered.yaml" \
  2>"$work/kustomize.log" ||
  { cat "$work/kustomize.log" >&2; exit 1; }
# The Secrets the manifests mount (make_secrets.sh's), as host directories
# readable by the pods' user (65532).
deploy/certs/make_dev_certs.sh "$work/certs" >/dev/null
certs="$work/certs"
secret_dir() {
  mkdir -p "$work/secrets/$1"
  cp "$certs/$2.crt" "$work/secrets/$1/tls.crt"
  cp "$certs/$2.key" "$work/secrets/$1/tls.key"
  cp "$certs/ca.crt" "$work/secrets/$1/ca.crt"
}
secret_dir omnistage-orchestrator-tls orchestrator
secret_dir omnistage-to-workers-tls to-workers
secret_dir omnistage-worker-tls worker
secret_dir omnistage-peer-tls peer
secret_dir omnistage-gateway-tls gateway
mkdir -p "$work/secrets/omnistage-tokens"
cp "$certs/tokens.yaml" "$work/secrets/omnistage-tokens/"
chown -R 65532:65532 "$work/secrets"
chmod -R u=rX,g=rX,o= "$work/secrets"
chmod 755 "$work" "$work/secrets"
omni() {
  local token="$1"
  shift
  bazel-bin/client/omni "$@" --tls_ca="$certs/ca.crt" --tls_server_name=omnistage \
    --token_file="$certs/$token.token"
}

dns_port="$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
/usr/bin/python3 deploy/podman/for_podman.py --dns_server="$gateway:$dns_port" \
  --services="$work/services.txt" --secrets="$work/secrets" <"$work/rendered.yaml" \
  >"$work/play.yaml"

podman network rm -f "$network" >/dev/null 2>&1 || true
podman network create --subnet "$subnet" --gateway "$gateway" --disable-dns "$network" >/dev/null
podman kube play --network "$network" "$work/play.yaml" >/dev/null
echo "== pods"
podman pod ps --format '{{.Name}} {{.Status}}' | sort

# The pods' addresses under their Services' names, as cluster DNS would give them
# (omnistage-orchestrator-peers and omnistage-orchestrators: every orchestrator
# pod, as publishNotReadyAddresses makes it). `want` counts the stage replicas
# among them (not the orchestrator pods, listed under both of those names).
pod_ip() {
  podman inspect "$(podman pod inspect "$1" --format '{{.InfraContainerID}}')" \
    --format '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}'
}
: >"$work/hosts"
want=0
while read -r service deployment; do
  for pod in $(podman pod ps --format '{{.Name}}' | grep "^$deployment-pod-" | sort); do
    echo "$(pod_ip "$pod") $service" >>"$work/hosts"
    [ "$deployment" = omnistage-orchestrator ] || want=$((want + 1))
  done
done <"$work/services.txt"
echo "== DNS records (dnsmasq on $gateway:$dns_port)"
cat "$work/hosts"
dnsmasq --keep-in-foreground --no-resolv --no-hosts --addn-hosts="$work/hosts" \
  --listen-address="$gateway" --bind-interfaces --port="$dns_port" --local=/#/ \
  --pid-file= --user=root --log-facility=- 2>"$work/dnsmasq.log" &
dns_pid=$!

# The orchestrator replicas' client addresses; the first one serves the prompt.
orchestrators=()
for pod in $(podman pod ps --format '{{.Name}}' | grep '^omnistage-orchestrator-pod-' | sort); do
  orchestrators+=("$(pod_ip "$pod"):50051")
done
orchestrator="${orchestrators[0]}"
# Ready when the orchestrator lists every replica alive. (Generous: on a busy
# machine the pods start slowly, and the orchestrators' first DNS lookups fail
# until dnsmasq is up, which c-ares retries on its own schedule.)
ready_s="${SIM_READY_S:-180}"
deadline=$((SECONDS + ready_s))
while [ "$SECONDS" -lt "$deadline" ]; do
  alive="$(omni admin status --json --server="$orchestrator" 2>/dev/null | grep -c '"alive": true' || true)"
  [ "$alive" = "$want" ] && break
  sleep 0.5
done
echo "== orchestrator at $orchestrator: $alive of $want replicas alive"
omni admin status --json --server="$orchestrator" |
  grep -E '"(name|address|origin|state|lastError)"' | sed 's/^ */  /'
if [ "$alive" != "$want" ]; then
  echo "run_sim: not every replica came alive in ${ready_s}s" >&2
  exit 1
fi
# Ready when it reaches every orchestrator (itself included) on the peer ports:
# DNS for omnistage-orchestrator-peers, the peer certificate and mutual TLS.
peers="${#orchestrators[@]}"
deadline=$((SECONDS + 60))
while [ "$SECONDS" -lt "$deadline" ]; do
  omni admin status --cluster --json --server="$orchestrator" >"$work/cluster" 2>&1 || true
  listed="$(grep -c '"reachable":' "$work/cluster" || true)"
  reachable="$(grep -c '"reachable": true' "$work/cluster" || true)"
  [ "$listed" = "$peers" ] && [ "$reachable" = "$peers" ] && break
  sleep 0.5
done
echo "== cluster from $orchestrator: $reachable of $peers orchestrators reachable"
sed -n '/"orchestrators"/,$p' "$work/cluster" | grep -E '"(nodeId|peerAddress|reachable)"' |
  sed 's/^ */  /'
if [ "$listed" != "$peers" ] || [ "$reachable" != "$peers" ]; then
  echo "run_sim: the orchestrators do not all reach each other; status:" >&2
  cat "$work/cluster" >&2
  exit 1
fi
echo "== generate: $prompt"
rm -f "$wav"
omni user generate --server="$orchestrator" --prompt="$prompt" --wav="$wav" \
  --timeout_s=60 | tee "$work/text"
echo
# Text came, and a WAV with more than its 44-byte header.
[ -s "$work/text" ] || { echo "run_sim: no text" >&2; exit 1; }
[ "$(stat -c %s "$wav" 2>/dev/null || echo 0)" -gt 44 ] || { echo "run_sim: no audio" >&2; exit 1; }
echo "== saved $wav ($(stat -c %s "$wav") bytes)"
# The orchestrator's Prometheus endpoint (--metrics_listen in the manifests) counted it.
echo "== metrics at ${orchestrator%:*}:9090"
/usr/bin/python3 -c 'import sys, urllib.request; print(urllib.request.urlopen(sys.argv[1]).read().decode())' \
  "http://${orchestrator%:*}:9090/metrics" >"$work/metrics"
grep -E '^omnistage_(requests_total|replica_up)' "$work/metrics"
grep -q '^omnistage_requests_total{finish_reason="stop"} 1$' "$work/metrics" ||
  { echo "run_sim: the orchestrator's metrics do not count the request" >&2; exit 1; }

# The OpenAI-compatible gateway (deploy/kubernetes/base/gateway.yaml), the
# first of its pods: ready (GET /health 200) once it reaches a ready
# orchestrator over TLS (the certificate's name "omnistage"), then six chat
# completions, not streamed, with the admin token as the bearer: 200 and the
# assistant's text, spread over more than one orchestrator. (After the metrics check: its request may land
# on any orchestrator.) gateway_call.py URL CA [TOKEN_FILE PROMPT]: GET, or POST a
# chat completion, over HTTPS checked against CA; prints the status line, then
# the body (or the reply's text).
cat >"$work/gateway_call.py" <<'PY'
import json, ssl, sys, urllib.error, urllib.request
url, ca = sys.argv[1], sys.argv[2]
request = urllib.request.Request(url)
if len(sys.argv) > 3:
    with open(sys.argv[3]) as f:
        request.add_header("Authorization", "Bearer " + f.read().strip())
    request.add_header("Content-Type", "application/json")
    # The model is the gateway's --model (gateway.yaml), the pipeline's name.
    request.data = json.dumps({"model": "omni-demo", "messages": [
        {"role": "user", "content": sys.argv[4]}]}).encode()
# HTTPS, the certificate checked against the CA (it names 127.0.0.1 and the
# Service, not the pod's address: the name is not checked here).
context = ssl.create_default_context(cafile=ca)
context.check_hostname = False
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}),  # pod addresses: no proxy
                                     urllib.request.HTTPSHandler(context=context))
try:
    with opener.open(request, timeout=60) as response:
        status, body = response.status, response.read().decode()
except urllib.error.HTTPError as e:
    status, body = e.code, e.read().decode(errors="replace")
except OSError as e:
    status, body = 0, str(e)
print(status)
if len(sys.argv) > 3 and status == 200:
    text = json.loads(body)["choices"][0]["message"]["content"]
    print(text)
    sys.exit(0 if text else 1)
print(body)
sys.exit(0 if status == 200 else 1)
PY
gateway_pod="$(podman pod ps --format '{{.Name}}' | grep '^omnistage-gateway-pod-' | sort | head -1 || true)"
[ -n "$gateway_pod" ] || { echo "run_sim: no gateway pod" >&2; exit 1; }
gw="$(pod_ip "$gateway_pod"):8000"
for _ in $(seq 1 60); do
  /usr/bin/python3 "$work/gateway_call.py" "https://$gw/health" "$certs/ca.crt" >"$work/health" 2>&1 && break
  sleep 0.5
done
if [ "$(head -1 "$work/health")" != 200 ]; then
  echo "run_sim: the gateway at $gw is not ready: $(tail -n +2 "$work/health")" >&2
  exit 1
fi
echo "== gateway at https://$gw: POST /v1/chat/completions: $prompt"
if ! /usr/bin/python3 "$work/gateway_call.py" "https://$gw/v1/chat/completions" "$certs/ca.crt" "$certs/admin.token" \
  "$prompt" >"$work/chat" 2>&1; then
  echo "run_sim: the chat completion through the gateway failed: $(cat "$work/chat")" >&2
  exit 1
fi
echo "HTTP $(head -1 "$work/chat"): $(tail -n +2 "$work/chat")"
# Five more: the gateway spreads its calls over the orchestrators (round robin
# over the ready ones its DNS name lists), so more than one of them counts
# requests beyond the one omni sent the first.
for i in 1 2 3 4 5; do
  /usr/bin/python3 "$work/gateway_call.py" "https://$gw/v1/chat/completions" "$certs/ca.crt" "$certs/admin.token" \
    "Hello $i" >"$work/chat$i" 2>&1 ||
    { echo "run_sim: chat completion $i through the gateway failed: $(cat "$work/chat$i")" >&2; exit 1; }
done
served=0
counts=""
for o in "${orchestrators[@]}"; do
  n="$(/usr/bin/python3 -c 'import sys, urllib.request; print(urllib.request.urlopen(sys.argv[1]).read().decode())' \
    "http://${o%:*}:9090/metrics" | awk '/^omnistage_requests_total\{/ {n += $2} END {print n + 0}')"
  [ "$o" = "$orchestrator" ] && n=$((n - 1))  # omni's request
  counts="$counts ${o%:*}=$n"
  [ "$n" -gt 0 ] && served=$((served + 1))
done
echo "== the gateway's 6 completions by orchestrator:$counts"
if [ "${#orchestrators[@]}" -ge 2 ] && [ "$served" -lt 2 ]; then
  echo "run_sim: the gateway's completions all went to one orchestrator" >&2
  exit 1
fi

# A long request on the first orchestrator, aborted through the last one: its
# client-chosen id is not held there, so the abort is asked of every peer and
# the first one stops it. Until the request is admitted the answer is
# "not found"; retried until "aborted". (A podman that plays one pod per
# Deployment, whatever its replicas, leaves nothing to forward to.)
if [ "${#orchestrators[@]}" -lt 2 ]; then
  echo "== forwarded abort not tried: podman started one orchestrator pod"
  exit 0
fi
other="${orchestrators[-1]}"
id="podman-abort-$$"
echo "== abort $id (on $orchestrator) through $other"
omni user generate --server="$orchestrator" --request_id="$id" --prompt="A long story" \
  --extra=0:sentences=100 --max_tokens=0:1000 --timeout_s=60 >"$work/long" 2>&1 &
gen_pid=$!
for _ in $(seq 1 40); do
  omni user abort --server="$other" --ids="$id" >"$work/abort" 2>&1 || true
  grep -q $'\taborted$' "$work/abort" && break
  sleep 0.25
done
cat "$work/abort"
rc=0
wait "$gen_pid" || rc=$?
gen_pid=""
if ! grep -q $'\taborted$' "$work/abort" || [ "$rc" != 3 ]; then
  echo "run_sim: the abort through $other did not stop $id (generate exited $rc):" >&2
  cat "$work/long" >&2
  exit 1
fi
grep 'was aborted' "$work/long"
