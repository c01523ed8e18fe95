#!/usr/bin/env bash
# Runs the `sim` overlay's pods under Debian's podman, and streams one prompt
# through them: the images built here (deploy/images/build.sh), the manifests
# rendered with `kubectl kustomize`, `podman kube play` on a network of its
# own, and a DNS server (dnsmasq on that network's gateway) answering the
# stages' headless Service names with the pods' addresses — the part of a
# cluster podman does not play. Secure as the manifests are: the Secrets they
# mount come from deploy/certs/make_dev_certs.sh (directories of this host
# under podman), the client speaks TLS with a token, the orchestrator mTLS to
# the workers.
#
#   deploy/podman/run_sim.sh                       # prompt "Tell me about the sea."
#   deploy/podman/run_sim.sh "Hello there" --wav=/tmp/hello.wav
#   SKIP_IMAGES=1 deploy/podman/run_sim.sh         # reuse images already built
#
# Prints the pods, the orchestrator's view of its replicas, the streamed text,
# and the WAV it saved. Everything it starts (pods, network, dnsmasq) is
# stopped when it exits, also on failure. Needs root, podman, runc, catatonit,
# dnsmasq, kubectl and python3-yaml (./setup.sh --with-podman installs them).
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

cleanup() {
  set +e
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
bazel build //client:omni >/dev/null 2>&1 || bazel build //client:omni

# (kustomize v5 warns about fields it deprecates; v2.0.3 needs them.)
kubectl kustomize deploy/kubernetes/overlays/sim >"$work/rendered.yaml" 2>"$work/kustomize.log" ||
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

# The pods' addresses under their Services' names, as cluster DNS would give them.
pod_ip() {
  podman inspect "$(podman pod inspect "$1" --format '{{.InfraContainerID}}')" \
    --format '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}'
}
: >"$work/hosts"
while read -r service deployment; do
  for pod in $(podman pod ps --format '{{.Name}}' | grep "^$deployment-pod-" | sort); do
    echo "$(pod_ip "$pod") $service" >>"$work/hosts"
  done
done <"$work/services.txt"
echo "== DNS records (dnsmasq on $gateway:$dns_port)"
cat "$work/hosts"
dnsmasq --keep-in-foreground --no-resolv --no-hosts --addn-hosts="$work/hosts" \
  --listen-address="$gateway" --bind-interfaces --port="$dns_port" --local=/#/ \
  --pid-file= --user=root --log-facility=- 2>"$work/dnsmasq.log" &
dns_pid=$!

orchestrator="$(pod_ip "$(podman pod ps --format '{{.Name}}' | grep '^omnistage-orchestrator-pod-' | head -1)"):50051"
# Ready when the orchestrator lists every replica alive.
want="$(wc -l <"$work/hosts")"
for _ in $(seq 1 120); do
  alive="$(omni admin status --server="$orchestrator" 2>/dev/null | grep -c '"alive": true' || true)"
  [ "$alive" = "$want" ] && break
  sleep 0.5
done
echo "== orchestrator at $orchestrator: $alive of $want replicas alive"
omni admin status --server="$orchestrator" |
  grep -E '"(name|address|origin|state)"' | sed 's/^ */  /'
if [ "$alive" != "$want" ]; then
  echo "run_sim: not every replica came alive; orchestrator log:" >&2
  podman logs omnistage-orchestrator-pod-0-orchestrator >&2 || true
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
