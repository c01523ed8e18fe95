#!/usr/bin/env bash
# Prints the Secrets the manifests mount, as YAML for `kubectl apply -f -`, from
# the files of deploy/certs/make_dev_certs.sh (made in DIR first if DIR has no
# ca.crt). For a trial; in production let cert-manager issue the five TLS
# Secrets (docs/kubernetes.md#security) and write the two token Secrets
# yourself.
#
#   deploy/kubernetes/make_secrets.sh /tmp/omni-certs | kubectl apply -f -
#
# Secrets (type kubernetes.io/tls, keys tls.crt, tls.key, ca.crt, as
# cert-manager writes them):
#   omnistage-orchestrator-tls   the orchestrator's server certificate (Service "omnistage")
#   omnistage-to-workers-tls     the orchestrator's client certificate for the workers
#   omnistage-worker-tls         the workers' server certificate
#   omnistage-peer-tls           the orchestrators' certificate for each other
#                                (peer port; server and client, name
#                                omnistage-orchestrator-peers)
#   omnistage-gateway-tls        the OpenAI gateways' HTTPS certificate (Services
#                                "omnistage-gateway", "omnistage-batch-gateway")
# and (type Opaque) omnistage-tokens (key tokens.yaml): the bearer tokens the
# orchestrator takes, and omnistage-batch-gateway-token (key token): the batch
# gateway's own token (gateway.token), which tokens.yaml gives role gateway.
set -euo pipefail
here="$(dirname "$(readlink -f "$0")")"
dir="${1:?usage: $0 DIR [NAMESPACE]}"
ns="${2:-omnistage}"
[ -f "$dir/ca.crt" ] || "$here/../certs/make_dev_certs.sh" "$dir" "$ns" >&2
# A DIR made by an older make_dev_certs.sh lacks the newer files (peer.*, gateway.*):
# refuse rather than print a Secret with an empty key, or a tokens.yaml without
# the batch gateway's token.
for file in ca.crt orchestrator.crt orchestrator.key to-workers.crt to-workers.key \
  worker.crt worker.key peer.crt peer.key gateway.crt gateway.key gateway.token tokens.yaml; do
  [ -f "$dir/$file" ] || {
    echo "$0: $dir/$file is missing (DIR made by an older make_dev_certs.sh?): use a new DIR" >&2
    exit 1
  }
done

b64() { base64 -w0 <"$1"; }
tls_secret() {
  cat <<YAML
---
apiVersion: v1
kind: Secret
metadata:
  name: $1
  labels:
    app.kubernetes.io/name: omnistage
type: kubernetes.io/tls
data:
  tls.crt: $(b64 "$dir/$2.crt")
  tls.key: $(b64 "$dir/$2.key")
  ca.crt: $(b64 "$dir/ca.crt")
YAML
}
tls_secret omnistage-orchestrator-tls orchestrator
tls_secret omnistage-to-workers-tls to-workers
tls_secret omnistage-worker-tls worker
tls_secret omnistage-peer-tls peer
tls_secret omnistage-gateway-tls gateway
cat <<YAML
---
apiVersion: v1
kind: Secret
metadata:
  name: omnistage-tokens
  labels:
    app.kubernetes.io/name: omnistage
type: Opaque
data:
  tokens.yaml: $(b64 "$dir/tokens.yaml")
---
apiVersion: v1
kind: Secret
metadata:
  name: omnistage-batch-gateway-token
  labels:
    app.kubernetes.io/name: omnistage
type: Opaque
data:
  token: $(b64 "$dir/gateway.token")
YAML
