#!/usr/bin/env bash
# Test of the Kubernetes manifests, offline (no cluster): renders the sim, gpu,
# keda, hpa and tracing overlays with kustomize (kustomize.sh: the one ./setup.sh
# installs, or $KUSTOMIZE, e.g. "kubectl kustomize"), checks each with
# validate/validate.mjs (schemas, unknown fields, cross-references, the
# orchestrator's peers, the gateways and the orchestrator they dial, the batch
# gateway's store, token and Service, security:
# with the Secrets make_secrets.sh writes, so every mounted key and the peer
# and orchestrator certificates' names are checked; the stage workers'
# autoscalers: KEDA ScaledObjects, or HPAs with the prometheus-adapter rule of
# overlays/hpa/prometheus-adapter-values.yaml), then makes
# sure the validator catches each defect planted in validate/testdata/.
# Optional: KUSTOMIZE_COMPARE="kubectl kustomize" (or another renderer) also
# renders with that one (e.g. kubectl 1.32's kustomize v5) and requires the
# same objects. Every renderer must print no warning (no deprecated field).
# Needs node and validate/node_modules (./setup.sh runs
# `npm ci --prefix deploy/kubernetes/validate`).
set -euo pipefail

# Work from the real location of this script: under Bazel it runs from a
# runfiles tree of symlinks, and node looks for node_modules next to the real
# path of validate.mjs.
HERE="$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")"
VALIDATE_DIR="$HERE/validate"
KUSTOMIZE="${KUSTOMIZE:-$HERE/kustomize.sh build}"
NODE="${NODE:-node}"
export HOME="${HOME:-${TEST_TMPDIR:-/tmp}}"

fail() { echo "FAIL: $*" >&2; exit 1; }

command -v "$NODE" >/dev/null || fail "node not found (set NODE=/path/to/node)"
for pkg in kubernetes-models @kubernetes-models/keda @kubernetes/client-node yaml; do
  [ -d "$VALIDATE_DIR/node_modules/$pkg" ] ||
    fail "$VALIDATE_DIR/node_modules/$pkg is missing: run ./setup.sh at the repository root" \
      "(it runs npm ci --prefix deploy/kubernetes/validate)"
done

TMP="$(mktemp -d "${TEST_TMPDIR:-/tmp}/manifests_test.XXXXXX")"
trap 'rm -rf "$TMP"' EXIT

# render RENDERER OVERLAY OUT: the renderer's output in OUT. Anything it
# prints on stderr (kustomize v5 warns there of deprecated fields) fails.
render() {
  # shellcheck disable=SC2086 # RENDERER is a command and its arguments.
  if ! $1 "$HERE/overlays/$2" >"$3" 2>"$TMP/stderr"; then
    cat "$TMP/stderr" >&2
    fail "$1 overlays/$2 failed"
  fi
  if [ -s "$TMP/stderr" ]; then
    cat "$TMP/stderr" >&2
    fail "$1 overlays/$2 printed warnings"
  fi
}

# The Secrets the manifests mount, as make_secrets.sh makes them for a trial:
# validated with the overlays, so each mounted key is checked.
"$HERE/make_secrets.sh" "$TMP/certs" >"$TMP/secrets.yaml" 2>"$TMP/certs.log" ||
  { cat "$TMP/certs.log" >&2; fail "make_secrets.sh failed"; }

checks=0
for overlay in sim gpu keda hpa tracing; do
  render "$KUSTOMIZE" "$overlay" "$TMP/$overlay.yaml"
  # The hpa overlay's External metrics need prometheus-adapter's rule.
  extra=()
  [ "$overlay" != hpa ] || extra=("$HERE/overlays/hpa/prometheus-adapter-values.yaml")
  if ! out="$("$NODE" "$VALIDATE_DIR/validate.mjs" "$TMP/$overlay.yaml" "$TMP/secrets.yaml" "${extra[@]}")"; then
    echo "$out" >&2
    fail "overlays/$overlay does not validate"
  fi
  echo "overlays/$overlay: $out"
  # The pipeline checks must have run: one orchestrator config, three workers,
  # and its peers (the orchestrator's replicas) through their headless Service.
  grep -q "1 pipeline config(s) checked against 3 stage worker container(s), 1 with peers" <<<"$out" ||
    fail "overlays/$overlay: the orchestrator's pipeline config (stages and peers) was not checked"
  # The gateways (the interactive one and the batch one): their --orchestrator
  # Service, probes and TLS to the orchestrator; the batch gateway's database
  # (one replica of a StatefulSet, on its volume) and token (role gateway).
  grep -q "2 gateway container(s) checked against their orchestrator, 1 with a batch database" <<<"$out" ||
    fail "overlays/$overlay: the gateways were not checked against the orchestrator they dial, the batch gateway's database and token"
  # The autoscalers: one per stage worker Deployment (stage, target, gauge,
  # minimum, scale-down window), and for the HPAs the adapter rule of each metric.
  case "$overlay" in
    keda) want="3 autoscaler(s) (3 ScaledObject, 0 HorizontalPodAutoscaler) checked against 3 stage worker Deployment(s)" ;;
    hpa) want="3 autoscaler(s) (0 ScaledObject, 3 HorizontalPodAutoscaler) checked against 3 stage worker Deployment(s), 3 External metric(s) served by a prometheus-adapter rule" ;;
    *) want="0 autoscaler(s) (0 ScaledObject, 0 HorizontalPodAutoscaler) checked against 3 stage worker Deployment(s)" ;;
  esac
  grep -qF "$want" <<<"$out" || fail "overlays/$overlay: the autoscalers were not checked as expected ($want)"
  # Traces: every process of the tracing overlay exports them (its ConfigMap
  # reaches the two gateways, the orchestrator and the three workers), none
  # elsewhere.
  traced=0
  [ "$overlay" != tracing ] || traced=6
  grep -qF "; $traced container(s) export traces" <<<"$out" ||
    fail "overlays/$overlay: expected $traced container(s) exporting traces"
  checks=$((checks + 1))

  if [ -n "${KUSTOMIZE_COMPARE:-}" ]; then
    render "$KUSTOMIZE_COMPARE" "$overlay" "$TMP/$overlay.compare.yaml"
    if ! diff <("$NODE" "$VALIDATE_DIR/canonical.mjs" "$TMP/$overlay.yaml") \
      <("$NODE" "$VALIDATE_DIR/canonical.mjs" "$TMP/$overlay.compare.yaml") >"$TMP/diff"; then
      cat "$TMP/diff" >&2
      fail "overlays/$overlay renders differently with $KUSTOMIZE and $KUSTOMIZE_COMPARE"
    fi
    echo "overlays/$overlay: same objects with $KUSTOMIZE_COMPARE"
    checks=$((checks + 1))
  fi
done

gpus="$(grep -c 'nvidia.com/gpu: 1' "$TMP/gpu.yaml" || true)"
[ "$gpus" = 3 ] || fail "overlays/gpu: expected 3 workers with nvidia.com/gpu: 1 in limits, found $gpus"
! grep -q 'nvidia.com/gpu' "$TMP/sim.yaml" || fail "overlays/sim must not ask for GPUs"
checks=$((checks + 1))
# The autoscaled overlays are the sim overlay plus autoscalers, without the
# workers' replicas (the validator rejects replicas: on an autoscaled
# Deployment); the orchestrator and the two gateways keep theirs.
for overlay in keda hpa; do
  n="$(grep -c '^  replicas:' "$TMP/$overlay.yaml" || true)"
  [ "$n" = 3 ] || fail "overlays/$overlay: expected replicas: on the orchestrator and the two gateways only, found $n"
done
checks=$((checks + 1))

# Negative cases: fixture, and a substring its problem line must contain.
NEGATIVE=(
  "unknown-field.yaml|containers[0].imagePullPolcy: unknown field"
  "wrong-type.yaml|readinessProbe.periodSeconds: wrong type: must be integer"
  "missing-required.yaml|Service/w: spec.ports[0].port: required field missing"
  "selector-no-pod.yaml|Service/w: spec.selector: {\"matchLabels\":{\"app\":\"wx\"}} matches the pod template of no Deployment"
  "probe-port.yaml|readinessProbe.grpc.port: 50062 is no containerPort of container stage-worker"
  "configmap-key.yaml|key pipeline.yaml is not in ConfigMap pipeline"
  "discovery-no-service.yaml|stages[0].discovery.dns: w-typo names no Service"
  "discovery-not-headless.yaml|stages[0].discovery.dns: Service/w is not headless"
  "stage-id-mismatch.yaml|--stage_id=1, but Service/w is discovered by stages[0]"
  "grace-short.yaml|terminationGracePeriodSeconds: 15 s does not exceed container stage-worker's --drain_timeout_ms (20000 ms)"
  "worker-no-client-ca.yaml|--tls_client_ca is missing: not secure by default"
  "secret-key-missing.yaml|--tls_client_ca=/s/ca.crt: key ca.crt is not in Secret w-tls (it has: tls.crt, tls.key)"
  "key-not-mounted.yaml|--tls_key=/keys/tls.key is in no mounted volume of container stage-worker"
  "probe-tls-port.yaml|readinessProbe.grpc.port: 50061 serves TLS (--listen with --tls_cert)"
  "peers-not-published.yaml|peers.discovery.dns: Service/o-peers needs publishNotReadyAddresses: true"
  "peers-no-peer-listen.yaml|--peer_listen is missing: its pipeline config (ConfigMap/pipeline pipeline.yaml) has peers:"
  "peers-other-pods.yaml|peers.discovery.dns: Service/o-peers does not select the pods of Deployment/orchestrator"
  "peer-cert-name.yaml|--peer_tls_cert (Secret peer-tls) does not name o-peers"
  "gateway-no-service.yaml|--orchestrator=o-typo:50051: o-typo names no Service of the rendered output"
  "gateway-probe-port.yaml|readinessProbe.httpGet.port: metrics is no containerPort of container gateway"
  "gateway-liveness-health.yaml|livenessProbe.httpGet.path: /health is 503 whenever the orchestrator is not ready"
  "gateway-not-headless.yaml|--orchestrator=o:50051: Service/o is not headless: its one virtual address pins each gateway pod to one orchestrator"
  "gateway-not-published.yaml|--orchestrator=o:50051: Service/o needs publishNotReadyAddresses: true"
  "gateway-probe-scheme.yaml|readinessProbe.httpGet.scheme: HTTP (the default): the gateway serves HTTPS only (--tls_cert): use scheme: HTTPS"
  "gateway-cert-name.yaml|the orchestrator's certificate (Deployment/orchestrator --tls_cert, Secret o-tls) does not name o (it has: DNS:o-other)"
  "keda-unknown-field.yaml|ScaledObject/wa: spec.advanced.horizontalPodAutoscalerConfig.behaviour: unknown field"
  "keda-wrong-type.yaml|ScaledObject/wa: spec.maxReplicaCount: wrong type: must be integer"
  "keda-no-target.yaml|ScaledObject/wa: spec.scaleTargetRef.name: wa-typo names no Deployment of the rendered output"
  "keda-unknown-stage.yaml|stage=\"c\" names no stage of the pipeline config (ConfigMap/pipeline pipeline.yaml has: a, b)"
  "keda-stage-mismatch.yaml|stage=\"b\" is stages[1] of ConfigMap/pipeline pipeline.yaml, but its target Deployment/wa passes --stage_id=0 (a)"
  "keda-min-zero.yaml|ScaledObject/wa: spec.minReplicaCount: 0: scale to zero is not supported"
  "keda-not-summed.yaml|max(...): omnistage_stage_demand_replicas must be sum(...) over the orchestrators"
  "keda-not-a-gauge.yaml|omnistage_stage_queue_depth is none of the orchestrator's scaling gauges"
  "autoscaled-replicas.yaml|Deployment/wb: spec.replicas: 2 is set, but ScaledObject/wb scales this Deployment"
  "two-autoscalers.yaml|Deployment/wa: scaled by 2 autoscalers (ScaledObject/wa, HorizontalPodAutoscaler/wa)"
  "hpa-no-stabilization.yaml|HorizontalPodAutoscaler/wa: spec.behavior.scaleDown.stabilizationWindowSeconds: not set"
  "tracing-missing-configmap.yaml|envFrom[0].configMapRef.name: ConfigMap tracing is not in the rendered output"
  "tracing-endpoint.yaml|OTEL_EXPORTER_OTLP_ENDPOINT=otel-collector:4318: OTLP/HTTP needs an http:// or https:// URL"
  "tracing-service-name.yaml|OTEL_SERVICE_NAME=omnistage: names the processes of all 2 workloads reading ConfigMap tracing alike"
  "tracing-sampler.yaml|OTEL_TRACES_SAMPLER_ARG=10: a ratio in [0, 1]"
  "hpa-adapter-no-matchers.yaml|prometheus-adapter rule for omnistage_stage_demand_replicas: metricsQuery sum by (stage) (<<.Series>>): lacks <<.LabelMatchers>>"
  "batch-replicas.yaml|StatefulSet/b: spec.replicas: 2: --batch_database: one gateway process per database file"
  "batch-deployment.yaml|Deployment/b: kind: Deployment: --batch_database=/data/b.db: one gateway process per database file: run it as a StatefulSet of one replica"
  "batch-not-persistent.yaml|--batch_database=/data/b.db is in volume data (emptyDir), not a PersistentVolumeClaim"
  "batch-read-only.yaml|--batch_database=/data/b.db is in volume data, mounted readOnly"
  "batch-no-token-file.yaml|--batch_token_file is missing: Deployment/orchestrator takes tokens (--tokens_file)"
  "batch-token-role.yaml|the token is identity 'batcher' with role user in Deployment/orchestrator's tokens file"
  "batch-token-unknown.yaml|the token is in no entry of Deployment/orchestrator's tokens file"
  "batch-service-mixed.yaml|Service/gateway: spec.selector: selects the pods of StatefulSet/b (--batch_database) and of Deployment/gateway (none)"
  "statefulset-service-name.yaml|StatefulSet/b: spec.serviceName: b-typo names no Service of the rendered output"
)
for case in "${NEGATIVE[@]}"; do
  fixture="${case%%|*}"
  want="${case#*|}"
  rc=0
  out="$("$NODE" "$VALIDATE_DIR/validate.mjs" "$VALIDATE_DIR/testdata/$fixture")" || rc=$?
  [ "$rc" = 1 ] || { echo "$out" >&2; fail "testdata/$fixture: validator exited $rc, expected 1"; }
  grep -qF -- "$want" <<<"$out" || { echo "$out" >&2; fail "testdata/$fixture: no problem line containing: $want"; }
  echo "testdata/$fixture: rejected: $(grep -F -- "$want" <<<"$out" | head -1)"
  checks=$((checks + 1))
done

echo "PASS: $checks checks: overlays sim, gpu, keda, hpa and tracing render without warnings ($KUSTOMIZE${KUSTOMIZE_COMPARE:+, same objects with $KUSTOMIZE_COMPARE})" \
  "and validate (schemas, unknown fields, selectors, ports, probes, ConfigMaps, discovery, stage ids," \
  "peers, the gateway's headless orchestrator Service, probes and their scheme and certificate name, the batch gateway's" \
  "StatefulSet of one replica, database volume, token role and Service, grace vs drain," \
  "TLS/mTLS/token flags, their Secret keys and the peer certificate's name; the autoscalers: target, stage, gauge," \
  "aggregation, threshold, minimum, scale-down window, one per worker, and prometheus-adapter's rule;" \
  "the OTEL_* settings each container gets);" \
  "${#NEGATIVE[@]} planted defects each rejected."
