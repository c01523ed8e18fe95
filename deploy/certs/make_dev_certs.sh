#!/usr/bin/env bash
# Makes everything security needs, for development and for trying it out: a CA,
# the orchestrator's server certificate, the workers' server certificate, the
# orchestrator's client certificate for the workers (mTLS), the certificate
# orchestrators present to each other on their peer ports (mTLS), and a tokens
# file with an admin, a user and a gateway token. Uses the openssl command line
# only.
#
#   deploy/certs/make_dev_certs.sh DIR [NAMESPACE]
#
# DIR gets: ca.crt ca.key, orchestrator.crt/.key (clients -> orchestrator, as
# the Service "omnistage"),
# worker.crt/.key (orchestrator -> workers), to-workers.crt/.key (the
# orchestrator's identity at the workers; spawned workers also serve with it),
# peer.crt/.key (orchestrator <-> orchestrator: served on the peer port and
# presented when calling a peer, so serverAuth and clientAuth, named as the
# headless Service "omnistage-orchestrator-peers" that peers: discovers),
# gateway.crt/.key (HTTPS clients -> the OpenAI gateway, as the Services
# "omnistage-gateway" and "omnistage-batch-gateway"), tokens.yaml, admin.token,
# user.token, gateway.token (the batch gateway's own token: role gateway, which
# runs batch lines as their owner). Names: localhost and 127.0.0.1 (local
# runs; peer.crt: 127.0.0.1 only), and the Kubernetes Services of
# deploy/kubernetes in NAMESPACE (default omnistage). In production use your
# own CA (cert-manager); see docs/security.md.
set -euo pipefail
dir="${1:?usage: $0 DIR [NAMESPACE]}"
ns="${2:-omnistage}"
mkdir -p "$dir"
cd "$dir"
umask 077

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 365 \
  -subj "/CN=omnistage-dev-ca" -keyout ca.key -out ca.crt 2>/dev/null

# issue NAME CN SANS: a certificate for servers and clients, signed by the CA.
issue() {
  local name="$1" cn="$2" sans="$3"
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=$cn" \
    -keyout "$name.key" -out "$name.csr" 2>/dev/null
  printf '%s\n' "basicConstraints=critical,CA:FALSE" "keyUsage=critical,digitalSignature" \
    "extendedKeyUsage=serverAuth,clientAuth" "subjectAltName=$sans" >"$name.ext"
  openssl x509 -req -in "$name.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 90 \
    -extfile "$name.ext" -out "$name.crt" 2>/dev/null
  rm -f "$name.csr" "$name.ext"
}

service() { echo "DNS:$1,DNS:$1.$ns,DNS:$1.$ns.svc,DNS:$1.$ns.svc.cluster.local"; }
issue orchestrator omnistage \
  "DNS:localhost,IP:127.0.0.1,$(service omnistage)"
issue worker omnistage-worker \
  "DNS:localhost,IP:127.0.0.1,$(service omnistage-thinker),$(service omnistage-talker),$(service omnistage-vocoder)"
issue to-workers omnistage-orchestrator "DNS:omnistage-orchestrator,DNS:localhost,IP:127.0.0.1"
issue peer omnistage-orchestrator-peers "$(service omnistage-orchestrator-peers),IP:127.0.0.1"
issue gateway omnistage-gateway \
  "DNS:localhost,IP:127.0.0.1,$(service omnistage-gateway),$(service omnistage-batch-gateway)"

openssl rand -hex 24 >admin.token
openssl rand -hex 24 >user.token
openssl rand -hex 24 >gateway.token
cat >tokens.yaml <<TOKENS
# Bearer tokens the orchestrator accepts (--tokens_file); see docs/security.md.
tokens:
  - identity: ops
    role: admin
    token: "$(cat admin.token)"
  - identity: demo
    role: user
    token: "$(cat user.token)"
  - identity: batch-gateway
    role: gateway
    token: "$(cat gateway.token)"
TOKENS
chmod 644 ./*.crt
echo "made $(ls | tr '\n' ' ')in $PWD"
