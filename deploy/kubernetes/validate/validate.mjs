#!/usr/bin/env node
// Offline validator of rendered omnistage manifests (`kubectl kustomize` output).
// Usage: node validate.mjs [FILE...]   (no FILE, or "-": read stdin)
// Checks every object against its kind's schema (schema.mjs), then the
// cross-references a cluster would only reveal at run time: Service and PDB
// selectors, Service target ports, probe ports, mounted ConfigMaps and keys,
// and the orchestrator's pipeline config against the stage workers (discovery
// Services, --stage_id, drain timeouts vs terminationGracePeriodSeconds) and
// against its own replicas (peers: a headless Service over the orchestrator's
// pods that publishes not-ready ones, at its --peer_listen port, and a peer
// certificate carrying that name), the gateway against the orchestrator it
// dials (--orchestrator: a headless Service, publishing not-ready pods,
// selecting orchestrator pods at their --listen port, whose certificate
// carries the name checked and chains to the gateway's CA; HTTP probes on the gateway's own port and paths, liveness not
// tied to the orchestrator), the batch gateway (batch.mjs: a gateway with
// --batch_database, one replica of a StatefulSet with its database on a
// writable PersistentVolumeClaim, its own token given role gateway by the
// orchestrators' tokens file, no Service mixing it with gateways without the
// store), each StatefulSet's serviceName a Service over its pods, Prometheus
// annotations naming a declared port, and
// security: the TLS, mTLS and token flags every omnistage container must pass
// (secure by default), each file they name provided by a key of a mounted
// Secret, and no gRPC probe on a port that serves TLS; and the autoscalers of
// the stage workers (autoscaling.mjs: KEDA ScaledObjects, HPAs and the
// prometheus-adapter rule they need, given as a further input document); and
// the OTEL_* settings each container gets (tracing.mjs), ConfigMaps of envFrom
// there unless optional.
// Prints one line per problem ("Kind/name: field.path: what") and exits 1 if
// any, else a summary and exit 0. Needs only node_modules (no cluster).

import { X509Certificate } from "node:crypto";
import { readFileSync } from "node:fs";
import { parseAllDocuments, parse as parseYaml } from "yaml";
import { checkAutoscalers } from "./autoscaling.mjs";
import { checkBatchServices, checkBatchStore, checkBatchToken, isGatewayFlags } from "./batch.mjs";
import { checkSchema } from "./schema.mjs";
import { checkTracing } from "./tracing.mjs";

const WORKER_DRAIN_DEFAULT_MS = 30000; // stage_worker --drain_timeout_ms default
const ORCHESTRATOR_DRAIN_DEFAULT_MS = 10000; // pipeline config drain_timeout_ms default
const GRACE_DEFAULT_S = 30; // Kubernetes' terminationGracePeriodSeconds default
const WORKLOAD_KINDS = new Set(["Deployment", "StatefulSet", "DaemonSet", "ReplicaSet"]);
const PROBES = ["startupProbe", "livenessProbe", "readinessProbe"];
// What each omnistage container must pass to be secure by default (docs/security.md).
const SECURE_ORCHESTRATOR = ["tls_cert", "tls_key", "tokens_file", "worker_tls_ca", "worker_tls_cert", "worker_tls_key"];
const SECURE_WORKER = ["tls_cert", "tls_key", "tls_client_ca"];
// With a peer port (--peer_listen): mutual TLS between the orchestrators.
const SECURE_PEER = ["peer_tls_cert", "peer_tls_key", "peer_tls_ca"];
// The gateway (a container passing --orchestrator): HTTPS for its clients,
// TLS to the orchestrator.
const SECURE_GATEWAY = ["tls_cert", "tls_key", "orchestrator_tls_ca"];
const GATEWAY_TLS_FILES = ["orchestrator_tls_ca", "orchestrator_tls_cert", "orchestrator_tls_key"];
// The batch gateway's own bearer token (a gateway with --batch_database).
const FILE_FLAGS = new Set([...SECURE_ORCHESTRATOR, ...SECURE_WORKER, ...SECURE_PEER, ...GATEWAY_TLS_FILES, "batch_token_file"]);
// What the gateway answers to GET (gateway/gateway.h); anything else is 404.
const GATEWAY_GET_PATHS = ["/v1/models", "/health", "/metrics"];
// The gateway's --listen default: reachable from inside its pod only.
const GATEWAY_LISTEN_DEFAULT = "127.0.0.1:8000";
// Extended key usages (OIDs) a peer certificate needs: it serves the peer port
// and is presented when calling a peer.
const EKU = { serverAuth: "1.3.6.1.5.5.7.3.1", clientAuth: "1.3.6.1.5.5.7.3.2" };

const problems = [];
// prometheus-adapter configs among the inputs (no Kubernetes objects).
const adapterConfigs = [];
const idOf = (obj) => `${obj?.kind ?? "?"}/${obj?.metadata?.name ?? "?"}`;
const report = (obj, path, message) => problems.push(`${idOf(obj)}: ${path ? path + ": " : ""}${message}`);

// --- input -----------------------------------------------------------------

function readInputs(args) {
  const files = args.length ? args : ["-"];
  const objects = [];
  for (const file of files) {
    const text = readFileSync(file === "-" ? 0 : file, "utf8");
    for (const doc of parseAllDocuments(text)) {
      if (doc.errors.length) {
        problems.push(`${file}: YAML: ${doc.errors[0].message.split("\n")[0]}`);
        continue;
      }
      const obj = doc.toJS();
      if (obj === null || obj === undefined) continue;
      if (typeof obj !== "object" || Array.isArray(obj)) {
        problems.push(`${file}: a document is not a mapping (an object)`);
      } else if (obj.apiVersion === undefined && obj.kind === undefined && (obj.rules?.external || obj.externalRules)) {
        adapterConfigs.push(obj); // the prometheus-adapter chart's values, or its config.yaml
      } else if (obj.kind === "List" && Array.isArray(obj.items)) {
        objects.push(...obj.items);
      } else {
        objects.push(obj);
      }
    }
  }
  return objects;
}

// --- helpers ---------------------------------------------------------------

// Whether a label selector ({matchLabels, matchExpressions} or, for Services,
// a plain map) selects `labels`.
function selects(selector, labels = {}) {
  const matchLabels = selector.matchLabels ?? (selector.matchExpressions ? {} : selector);
  for (const [k, v] of Object.entries(matchLabels)) if (labels[k] !== v) return false;
  for (const e of selector.matchExpressions ?? []) {
    const has = Object.hasOwn(labels, e.key);
    const isIn = has && (e.values ?? []).includes(labels[e.key]);
    if (e.operator === "In" && !isIn) return false;
    if (e.operator === "NotIn" && isIn) return false;
    if (e.operator === "Exists" && !has) return false;
    if (e.operator === "DoesNotExist" && has) return false;
  }
  return true;
}

const isEmptySelector = (s) =>
  !s || (Object.keys(s.matchLabels ?? (s.matchExpressions ? {} : s)).length === 0 && !(s.matchExpressions ?? []).length);
const showSelector = (s) => JSON.stringify(s.matchLabels || s.matchExpressions ? s : { matchLabels: s });

// A container's --name=value / --name value flags from command and args.
function flagsOf(container) {
  const words = [...(container.command ?? []), ...(container.args ?? [])].map(String);
  const flags = new Map();
  words.forEach((w, i) => {
    const m = /^--?([A-Za-z0-9_.-]+)(?:=(.*))?$/.exec(w);
    if (!m) return;
    const next = words[i + 1];
    flags.set(m[1], m[2] ?? (next !== undefined && !next.startsWith("-") ? next : ""));
  });
  return flags;
}

// Whether a container declares `port` (a number, or a port name).
function hasPort(container, port) {
  return (container.ports ?? []).some((p) => (typeof port === "number" ? p.containerPort === port : p.name === port));
}

// --- cross-references ------------------------------------------------------

// Pod template checks that need nothing outside the workload itself, plus its
// ConfigMap references. Returns {obj, labels, containers, spec} or null.
function checkWorkload(w, configMaps) {
  const spec = w.spec?.template?.spec;
  if (!spec || !Array.isArray(spec.containers)) return null;
  const labels = w.spec.template.metadata?.labels ?? {};
  if (w.spec.selector && !selects(w.spec.selector, labels)) {
    report(w, "spec.selector", "does not match the pod template's labels (spec.template.metadata.labels)");
  }
  const volumes = new Map((spec.volumes ?? []).map((v) => [v.name, v]));
  // A StatefulSet's volumeClaimTemplates are volumes of each of its pods.
  if (w.kind === "StatefulSet") {
    for (const t of w.spec.volumeClaimTemplates ?? []) volumes.set(t.metadata?.name, { name: t.metadata?.name, persistentVolumeClaim: {} });
  }
  // Scrapers that discover pods by annotation scrape this port: it must be one
  // a container declares.
  const scrapePort = w.spec.template.metadata?.annotations?.["prometheus.io/port"];
  if (scrapePort !== undefined && !spec.containers.some((c) => hasPort(c, Number(scrapePort)))) {
    report(w, 'spec.template.metadata.annotations["prometheus.io/port"]', `${scrapePort} is no containerPort of the pod`);
  }
  spec.containers.forEach((c, ci) => {
    const at = `spec.template.spec.containers[${ci}]`;
    for (const probe of PROBES) {
      const p = c[probe];
      if (!p) continue;
      for (const [handler, port] of [["grpc", p.grpc?.port], ["httpGet", p.httpGet?.port], ["tcpSocket", p.tcpSocket?.port]]) {
        if (port !== undefined && !hasPort(c, port)) {
          report(w, `${at}.${probe}.${handler}.port`, `${port} is no containerPort of container ${c.name}`);
        }
      }
    }
    (c.volumeMounts ?? []).forEach((m, mi) => {
      if (!volumes.has(m.name)) report(w, `${at}.volumeMounts[${mi}].name`, `no volume named ${m.name} in the pod`);
    });
    const env = new Set((c.env ?? []).map((e) => e.name));
    [...(c.command ?? []), ...(c.args ?? [])].forEach((word) => {
      for (const [, name] of String(word).matchAll(/\$\(([A-Za-z_][A-Za-z0-9_]*)\)/g)) {
        if (!env.has(name)) report(w, `${at}.args`, `$(${name}) names no env var of container ${c.name} (stays literal)`);
      }
    });
    (c.envFrom ?? []).forEach((f, fi) => {
      if (f.configMapRef) checkConfigMapRef(w, `${at}.envFrom[${fi}].configMapRef`, f.configMapRef.name, f.configMapRef.optional, [], configMaps);
    });
    (c.env ?? []).forEach((e, ei) => {
      const ref = e.valueFrom?.configMapKeyRef;
      if (ref) checkConfigMapRef(w, `${at}.env[${ei}].valueFrom.configMapKeyRef`, ref.name, ref.optional, [ref.key], configMaps);
    });
  });
  (spec.volumes ?? []).forEach((v, vi) => {
    const at = `spec.template.spec.volumes[${vi}]`;
    if (v.configMap) {
      checkConfigMapRef(w, `${at}.configMap`, v.configMap.name, v.configMap.optional, (v.configMap.items ?? []).map((i) => i.key), configMaps);
    }
    (v.projected?.sources ?? []).forEach((s, si) => {
      if (s.configMap) {
        checkConfigMapRef(w, `${at}.projected.sources[${si}].configMap`, s.configMap.name, s.configMap.optional, (s.configMap.items ?? []).map((i) => i.key), configMaps);
      }
    });
  });
  return { obj: w, labels, containers: spec.containers, spec };
}

function checkConfigMapRef(w, path, name, optional, keys, configMaps) {
  const cm = configMaps.get(name);
  if (!cm) {
    if (!optional) report(w, `${path}.name`, `ConfigMap ${name} is not in the rendered output`);
    return;
  }
  for (const key of keys) {
    if (!Object.hasOwn(cm.data ?? {}, key) && !Object.hasOwn(cm.binaryData ?? {}, key)) {
      report(w, path, `key ${key} is not in ConfigMap ${name} (it has: ${Object.keys({ ...cm.data, ...cm.binaryData }).join(", ") || "none"})`);
    }
  }
}

function checkService(svc, workloads) {
  const selector = svc.spec?.selector;
  if (isEmptySelector(selector)) return []; // endpoints managed by hand
  const selected = workloads.filter((w) => selects(selector, w.labels));
  if (!selected.length) {
    report(svc, "spec.selector", `${showSelector(selector)} matches the pod template of no Deployment`);
    return [];
  }
  (svc.spec.ports ?? []).forEach((p, pi) => {
    const target = p.targetPort ?? p.port;
    for (const w of selected) {
      if (!w.containers.some((c) => hasPort(c, target))) {
        report(svc, `spec.ports[${pi}].targetPort`, `${target} is no containerPort of the pods of ${idOf(w.obj)}`);
      }
    }
  });
  return selected;
}

function checkPdb(pdb, workloads) {
  const selector = pdb.spec?.selector;
  if (isEmptySelector(selector) || !workloads.some((w) => selects(selector, w.labels))) {
    report(pdb, "spec.selector", `${showSelector(selector ?? {})} matches the pod template of no Deployment`);
  }
}

// The pipeline config the container reads (--config=PATH), from the ConfigMap
// mounted at PATH's directory; null (after reporting why) when not found.
function mountedConfig(w, container, path, configMaps) {
  const where = `${idOf(w.obj)}: container ${container.name} --config=${path}`;
  for (const m of container.volumeMounts ?? []) {
    const dir = m.mountPath.replace(/\/+$/, "");
    if (!path.startsWith(dir + "/")) continue;
    const rest = path.slice(dir.length + 1);
    const volume = (w.spec.volumes ?? []).find((v) => v.name === m.name)?.configMap;
    if (!volume) break; // not a ConfigMap volume
    const item = (volume.items ?? []).find((i) => i.path === rest);
    const key = m.subPath ? m.subPath : volume.items ? item?.key : rest;
    const data = configMaps.get(volume.name)?.data ?? {};
    if (key === undefined || !Object.hasOwn(data, key)) return null; // reported by checkConfigMapRef
    try {
      return { name: volume.name, key, config: parseYaml(data[key]) ?? {} };
    } catch (err) {
      problems.push(`${where}: ConfigMap ${volume.name} key ${key} is no valid YAML: ${err.message.split("\n")[0]}`);
      return null;
    }
  }
  problems.push(`${where}: no mounted ConfigMap key provides this file`);
  return null;
}

// Where container `c` of workload `w` finds the file `path`: {mount, rest,
// volume} of the first volume mounted above it, or null.
function mountOf(w, c, path) {
  for (const m of c.volumeMounts ?? []) {
    const dir = m.mountPath.replace(/\/+$/, "");
    if (!path.startsWith(dir + "/")) continue;
    return { mount: m, rest: path.slice(dir.length + 1), volume: (w.spec.volumes ?? []).find((v) => v.name === m.name) };
  }
  return null;
}

// The Secret key providing the file `path` that container `c` of workload `w`
// reads for --flag; reports what is missing.
function checkSecretFile(w, c, ci, flag, path, secrets) {
  const at = `spec.template.spec.containers[${ci}].args`;
  const found = mountOf(w, c, path);
  if (!found) {
    report(w.obj, at, `--${flag}=${path} is in no mounted volume of container ${c.name}`);
    return;
  }
  const { mount: m, rest, volume } = found;
  if (!volume?.secret) {
    report(w.obj, at, `--${flag}=${path} is in volume ${m.name}, which is no Secret (keys and certificates belong in Secrets)`);
    return;
  }
  const items = volume.secret.items;
  const key = m.subPath ? m.subPath : items ? items.find((i) => i.path === rest)?.key : rest;
  const name = volume.secret.secretName;
  const secret = secrets.get(name);
  if (!secret) {
    if (!volume.secret.optional) report(w.obj, at, `--${flag}=${path}: Secret ${name} is not in the rendered output`);
    return;
  }
  const keys = Object.keys({ ...secret.data, ...secret.stringData });
  if (key === undefined || !keys.includes(key)) {
    report(w.obj, at, `--${flag}=${path}: key ${key ?? rest} is not in Secret ${name} (it has: ${keys.join(", ") || "none"})`);
  }
}

// The file container `c` of workload `w` reads at `path`, from a mounted
// Secret of the input: {data (a string or a Buffer), secret, key} or null (no
// such Secret given: checkSecretFile reports the missing ones).
function secretFileAt(w, c, path, secrets) {
  const found = mountOf(w, c, path);
  const volume = found?.volume?.secret;
  if (!volume) return null;
  const key = found.mount.subPath ? found.mount.subPath : volume.items ? volume.items.find((i) => i.path === found.rest)?.key : found.rest;
  const secret = secrets.get(volume.secretName);
  const data = secret?.stringData?.[key] ?? (secret?.data?.[key] !== undefined ? Buffer.from(String(secret.data[key]), "base64") : undefined);
  return data === undefined ? null : { data, secret: volume.secretName, key };
}

// The certificate container `c` of workload `w` reads at `path`, from a
// mounted Secret of the input: {cert, secret} or null (no such Secret given, or
// not a PEM certificate: checkSecretFile reports the missing ones).
function certificateAt(w, c, path, secrets) {
  const file = secretFileAt(w, c, path, secrets);
  if (!file) return null;
  const { data } = file;
  // Every certificate of a PEM bundle (a chain, or a CA bundle); the first one
  // is the certificate itself.
  const all = [];
  for (const [pem] of String(data).matchAll(/-----BEGIN CERTIFICATE-----[^-]+-----END CERTIFICATE-----/g)) {
    try {
      all.push(new X509Certificate(pem));
    } catch {
      // not a certificate: skipped
    }
  }
  if (!all.length) {
    try {
      all.push(new X509Certificate(data)); // DER
    } catch {
      return null;
    }
  }
  return { cert: all[0], all, secret: file.secret };
}

// Whether a certificate of `chain` (a leaf and its intermediates) was signed
// by a certificate of `cas` (a CA bundle): the chain a TLS client would build.
function issuedBy(chain, cas) {
  return chain.some((cert) => cas.some((ca) => cert.checkIssued(ca) && cert.verify(ca.publicKey)));
}

// Secure by default: the flags an omnistage container must pass, the files
// they name, and probes that can reach a TLS-serving container.
function checkSecurity(w, c, ci, flags, secrets) {
  const required = flags.has("config") ? [...SECURE_ORCHESTRATOR]
    : flags.has("stage_id") ? [...SECURE_WORKER]
    : flags.has("orchestrator") ? [...SECURE_GATEWAY] : [];
  if (flags.get("peer_listen")) required.push(...SECURE_PEER);
  for (const flag of required) {
    if (!flags.get(flag)) {
      report(w.obj, `spec.template.spec.containers[${ci}].args`, `--${flag} is missing: not secure by default (docs/security.md)`);
    }
  }
  for (const [flag, value] of flags) {
    if (FILE_FLAGS.has(flag) && value) checkSecretFile(w, c, ci, flag, value, secrets);
  }
  // The ports that serve TLS: --listen with --tls_cert, --peer_listen with --peer_tls_cert.
  const tlsPorts = new Map();
  for (const [listen, cert] of [["listen", "tls_cert"], ["peer_listen", "peer_tls_cert"]]) {
    if (flags.get(cert) && flags.get(listen)) tlsPorts.set(portOf(flags.get(listen)), `--${listen} with --${cert}`);
  }
  for (const probe of PROBES) {
    let port = c[probe]?.grpc?.port;
    if (typeof port === "string") port = (c.ports ?? []).find((p) => p.name === port)?.containerPort;
    if (port !== undefined && tlsPorts.has(port)) {
      report(w.obj, `spec.template.spec.containers[${ci}].${probe}.grpc.port`,
        `${port} serves TLS (${tlsPorts.get(port)}) and the kubelet's gRPC probes cannot speak TLS: probe the --health_listen port`);
    }
  }
}

// "0.0.0.0:50052" -> 50052.
const portOf = (hostPort) => Number(String(hostPort ?? "").split(":").pop());

// discovery.dns -> Service name: "svc" or "svc.<ns>[.svc[.cluster.local]]".
function serviceOfDns(dns, services) {
  const m = /^([a-z0-9-]+)(?:\.([a-z0-9-]+)(?:\.svc(?:\.cluster\.local)?)?)?\.?$/.exec(dns);
  if (!m) return null;
  return services.find((s) => s.metadata?.name === m[1] && (!m[2] || !s.metadata.namespace || s.metadata.namespace === m[2])) ?? null;
}

function checkGrace(w, c, drainMs, what) {
  const grace = w.spec.terminationGracePeriodSeconds ?? GRACE_DEFAULT_S;
  if (!(grace * 1000 > drainMs)) {
    report(w.obj, "spec.template.spec.terminationGracePeriodSeconds",
      `${grace} s does not exceed container ${c.name}'s ${what} (${drainMs} ms): SIGKILL would cut the drain short`);
  }
}

// The pipeline config's peers: against the orchestrator that reads it: its
// peer port, and for DNS peers the headless Service over its own pods and the
// name its peer certificate must carry.
function checkPeers(orch, container, ci, cfg, services, serviceTargets, secrets) {
  const peers = cfg.config.peers;
  if (!peers || typeof peers !== "object") return false;
  const at = `ConfigMap/${cfg.name} ${cfg.key}: peers`;
  const flags = flagsOf(container);
  const listen = flags.get("peer_listen");
  if (!listen) {
    report(orch.obj, `spec.template.spec.containers[${ci}].args`,
      `--peer_listen is missing: its pipeline config (ConfigMap/${cfg.name} ${cfg.key}) has peers:, and the orchestrator refuses to start without a peer port`);
  }
  const d = peers.discovery;
  if (!d) return true; // addresses: nothing to check offline
  const svc = serviceOfDns(String(d.dns), services);
  if (!svc) {
    problems.push(`${at}.discovery.dns: ${d.dns} names no Service of the rendered output`);
    return true;
  }
  if (svc.spec?.clusterIP !== "None") {
    problems.push(`${at}.discovery.dns: ${idOf(svc)} is not headless (needs clusterIP: None to list every orchestrator pod)`);
  }
  if (svc.spec?.publishNotReadyAddresses !== true) {
    problems.push(`${at}.discovery.dns: ${idOf(svc)} needs publishNotReadyAddresses: true ` +
      `(a draining or not-ready orchestrator still holds streams whose aborts must reach it)`);
  }
  if (!(svc.spec?.ports ?? []).some((p) => p.port === d.port)) {
    problems.push(`${at}.discovery.port: ${d.port} is no port of ${idOf(svc)}`);
  }
  const selected = serviceTargets.get(svc) ?? [];
  if (!selected.includes(orch)) {
    problems.push(`${at}.discovery.dns: ${idOf(svc)} does not select the pods of ${idOf(orch.obj)}, whose replicas the peers are`);
  }
  for (const w of selected) {
    if (!w.containers.some((c) => portOf(flagsOf(c).get("peer_listen")) === d.port)) {
      problems.push(`${at}.discovery.dns: ${idOf(svc)} selects the pods of ${idOf(w.obj)}, which serve no peer port ${d.port} (--peer_listen)`);
    } else if (!w.containers.some((c) => hasPort(c, d.port))) {
      problems.push(`${at}.discovery.port: ${d.port} is no containerPort of the pods of ${idOf(w.obj)} (selected by ${idOf(svc)})`);
    }
  }
  if (listen && portOf(listen) !== d.port) {
    problems.push(`${at}.discovery.port: ${d.port} is not the port of ${idOf(orch.obj)}'s --peer_listen=${listen}`);
  }
  // Peers check each other's certificate against the discovery name as
  // written, and each one both serves and presents it.
  const found = flags.get("peer_tls_cert") && certificateAt(orch, container, flags.get("peer_tls_cert"), secrets);
  if (found) {
    const where = `--peer_tls_cert (Secret ${found.secret})`;
    const name = String(d.dns).replace(/\.$/, "");
    if (!found.cert.checkHost(name, { subjects: "never" })) {
      report(orch.obj, `spec.template.spec.containers[${ci}].args`,
        `${where} does not name ${name} (it has: ${found.cert.subjectAltName ?? "no subjectAltName"}), which peers check it against`);
    }
    const eku = found.cert.keyUsage; // extended key usages; undefined: any
    for (const [usage, oid] of Object.entries(EKU)) {
      if (eku && !eku.includes(oid)) {
        report(orch.obj, `spec.template.spec.containers[${ci}].args`,
          `${where} lacks extendedKeyUsage ${usage}: it is ${usage === "serverAuth" ? "served on the peer port" : "presented when calling a peer"}`);
      }
    }
  }
  return true;
}

// A container port (a number, or a port name) as a number; undefined when the
// container declares no such port.
function containerPortNumber(container, port) {
  if (typeof port === "number") return port;
  return (container.ports ?? []).find((p) => p.name === port)?.containerPort;
}

// "omnistage:50051", "dns:///omnistage:50051" -> {host: "omnistage", port: 50051}.
function splitTarget(target) {
  const hostPort = String(target).replace(/^dns:\/\/\//, "");
  const colon = hostPort.lastIndexOf(":");
  if (colon < 0) return { host: hostPort, port: NaN };
  return { host: hostPort.slice(0, colon).replace(/^\[(.*)\]$/, "$1"), port: Number(hostPort.slice(colon + 1)) };
}

// The gateway (gateway/: a container passing --orchestrator) against its own
// pod (listen port, HTTP probes, scrape annotations) and against the
// orchestrator it dials: a headless Service of the rendered output (publishing
// not-ready pods) selecting orchestrator pods, at their client port
// (--listen), serving TLS with a certificate that carries the name checked
// (--orchestrator_tls_server_name, else the name dialled) and chains to the
// gateway's CA.
// Returns whether the orchestrator side was found and checked.
function checkGateway(w, c, ci, flags, services, serviceTargets, secrets) {
  const at = `spec.template.spec.containers[${ci}]`;
  const listen = flags.get("listen") || GATEWAY_LISTEN_DEFAULT;
  const listenPort = portOf(listen);
  if (/^(127\.|localhost:|\[::1\]:)/.test(listen)) {
    report(w.obj, `${at}.args`, `--listen=${listen}${flags.get("listen") ? "" : " (the default)"} is reachable from inside the pod only: ` +
      `the Service and the kubelet's probes cannot reach it (use --listen=0.0.0.0:PORT)`);
  }
  // Probes: plain HTTP GET, on the --listen port, of a path the gateway serves.
  // Liveness and start-up must not depend on the orchestrator (/health does):
  // an orchestrator outage would restart every gateway.
  for (const probe of PROBES) {
    const p = c[probe];
    if (!p) continue;
    if (p.grpc) report(w.obj, `${at}.${probe}.grpc`, `the gateway serves no gRPC: probe it with httpGet`);
    const get = p.httpGet;
    if (!get) continue;
    const port = containerPortNumber(c, get.port);
    if (port !== undefined && port !== listenPort) {
      report(w.obj, `${at}.${probe}.httpGet.port`, `${get.port} is not the gateway's --listen port ${listenPort}`);
    }
    const scheme = flags.get("tls_cert") ? "HTTPS" : "HTTP";
    if ((get.scheme ?? "HTTP") !== scheme) {
      report(w.obj, `${at}.${probe}.httpGet.scheme`, scheme === "HTTPS"
        ? `${get.scheme ?? "HTTP (the default)"}: the gateway serves HTTPS only (--tls_cert): use scheme: HTTPS`
        : `${get.scheme}: the gateway serves plain HTTP (no --tls_cert)`);
    }
    const path = String(get.path ?? "/").split("?")[0];
    if (!GATEWAY_GET_PATHS.includes(path)) {
      report(w.obj, `${at}.${probe}.httpGet.path`, `${path} is not served by the gateway (GET ${GATEWAY_GET_PATHS.join(", ")}; anything else is 404)`);
    } else if (path === "/health" && probe !== "readinessProbe") {
      report(w.obj, `${at}.${probe}.httpGet.path`, `/health is 503 whenever the orchestrator is not ready: as a ${probe} it would restart ` +
        `every gateway during an orchestrator outage (use /v1/models, which the gateway answers itself)`);
    }
  }
  const annotations = w.obj.spec.template.metadata?.annotations ?? {};
  if (annotations["prometheus.io/scrape"] === "true") {
    if (annotations["prometheus.io/port"] !== undefined && Number(annotations["prometheus.io/port"]) !== listenPort) {
      report(w.obj, 'spec.template.metadata.annotations["prometheus.io/port"]', `${annotations["prometheus.io/port"]}: the gateway serves /metrics on its --listen port ${listenPort}`);
    }
    if ((annotations["prometheus.io/path"] ?? "/metrics") !== "/metrics") {
      report(w.obj, 'spec.template.metadata.annotations["prometheus.io/path"]', `${annotations["prometheus.io/path"]}: the gateway serves its metrics at /metrics`);
    }
  }
  if (!!flags.get("orchestrator_tls_cert") !== !!flags.get("orchestrator_tls_key")) {
    report(w.obj, `${at}.args`, `--orchestrator_tls_cert and --orchestrator_tls_key go together (a client certificate and its key)`);
  }

  // The orchestrator it dials.
  const target = flags.get("orchestrator");
  const where = `${at}.args`;
  const { host, port } = splitTarget(target);
  const svc = serviceOfDns(host, services);
  if (!svc) {
    report(w.obj, where, `--orchestrator=${target}: ${host} names no Service of the rendered output`);
    return false;
  }
  // One address per orchestrator pod, so the gateway's channel spreads calls
  // over the ready ones; a draining one stays listed while its streams finish.
  if (svc.spec?.clusterIP !== "None") {
    report(w.obj, where, `--orchestrator=${target}: ${idOf(svc)} is not headless: its one virtual address pins each ` +
      `gateway pod to one orchestrator (calls do not spread, and while that one drains the gateway answers 503): ` +
      `use a headless Service (clusterIP: None) of the orchestrator pods`);
  } else if (svc.spec?.publishNotReadyAddresses !== true) {
    report(w.obj, where, `--orchestrator=${target}: ${idOf(svc)} needs publishNotReadyAddresses: true: a draining ` +
      `orchestrator must stay listed while the gateway's streams on it finish (the gateway itself skips those not ready)`);
  }
  const svcPort = (svc.spec?.ports ?? []).find((p) => p.port === port);
  if (!svcPort) {
    report(w.obj, where, `--orchestrator=${target}: ${port} is no port of ${idOf(svc)} (it has: ${(svc.spec?.ports ?? []).map((p) => p.port).join(", ") || "none"})`);
    return false;
  }
  const selected = serviceTargets.get(svc) ?? [];
  const orchestrators = [];
  for (const o of selected) {
    const oc = o.containers.find((x) => flagsOf(x).has("config"));
    if (!oc) {
      report(w.obj, where, `--orchestrator=${target}: ${idOf(svc)} selects the pods of ${idOf(o.obj)}, which run no orchestrator (no --config)`);
      continue;
    }
    const targetPort = svcPort.targetPort ?? svcPort.port;
    const oListen = flagsOf(oc).get("listen");
    if (containerPortNumber(oc, targetPort) !== portOf(oListen)) {
      report(w.obj, where, `--orchestrator=${target}: ${idOf(svc)} port ${port} leads to port ${targetPort} of ${idOf(o.obj)}, ` +
        `which is not its orchestrator's client port (--listen=${oListen ?? "unset"})`);
      continue;
    }
    orchestrators.push({ o, oc });
  }
  if (!selected.length) return false; // checkService reported the selector
  if (!orchestrators.length) return false;
  if (flags.get("batch_database")) {
    checkBatchToken({ w, c, ci, flags, orchestrators, secrets, flagsOf, secretFileAt, idOf, report });
  }

  // TLS: the gateway's CA and the name it checks against the orchestrator's certificate.
  const name = flags.get("orchestrator_tls_server_name") || host.replace(/\.$/, "");
  const ca = flags.get("orchestrator_tls_ca") && certificateAt(w, c, flags.get("orchestrator_tls_ca"), secrets);
  for (const { o, oc } of orchestrators) {
    const oflags = flagsOf(oc);
    if (!oflags.get("tls_cert")) {
      if (flags.get("orchestrator_tls_ca")) {
        report(w.obj, where, `--orchestrator_tls_ca is set but ${idOf(o.obj)} serves plaintext (no --tls_cert): the TLS handshake would fail`);
      }
      continue;
    }
    const served = certificateAt(o, oc, oflags.get("tls_cert"), secrets);
    if (!served) continue; // its Secret is not in the input (or checkSecretFile reported it)
    const what = `the orchestrator's certificate (${idOf(o.obj)} --tls_cert, Secret ${served.secret})`;
    if (!served.cert.checkHost(name, { subjects: "never" })) {
      report(w.obj, where, `--orchestrator=${target}: ${what} does not name ${name} ` +
        `(it has: ${served.cert.subjectAltName ?? "no subjectAltName"}): dial one of its names or set --orchestrator_tls_server_name`);
    }
    if (ca && !issuedBy(served.all, ca.all)) {
      report(w.obj, where, `--orchestrator_tls_ca (Secret ${ca.secret}) did not issue ${what}: the TLS handshake would fail`);
    }
  }
  return true;
}

// The orchestrator's pipeline config against the rendered workers.
function checkPipeline(orch, container, cfg, services, workloads, serviceTargets) {
  const where = `ConfigMap/${cfg.name} ${cfg.key}`;
  const drain = cfg.config.drain_timeout_ms ?? ORCHESTRATOR_DRAIN_DEFAULT_MS;
  checkGrace(orch, container, drain, "pipeline drain_timeout_ms");
  const stages = Array.isArray(cfg.config.stages) ? cfg.config.stages : [];
  if (!stages.length) problems.push(`${where}: stages: no stages`);
  stages.forEach((stage, index) => {
    const d = stage?.discovery;
    if (!d) return;
    const at = `${where}: stages[${index}].discovery`;
    const svc = serviceOfDns(String(d.dns), services);
    if (!svc) {
      problems.push(`${at}.dns: ${d.dns} names no Service of the rendered output`);
      return;
    }
    if (svc.spec?.clusterIP !== "None") {
      problems.push(`${at}.dns: ${idOf(svc)} is not headless (needs clusterIP: None to list every pod)`);
    }
    if (!(svc.spec?.ports ?? []).some((p) => p.port === d.port)) {
      problems.push(`${at}.port: ${d.port} is no port of ${idOf(svc)}`);
    }
    for (const w of serviceTargets.get(svc) ?? []) {
      if (!w.containers.some((c) => c.ports?.some((p) => p.containerPort === d.port))) {
        problems.push(`${at}.port: ${d.port} is no containerPort of the pods of ${idOf(w.obj)} (selected by ${idOf(svc)})`);
      }
      w.containers.forEach((c, ci) => {
        const id = flagsOf(c).get("stage_id");
        if (id !== undefined && String(id) !== String(index)) {
          report(w.obj, `spec.template.spec.containers[${ci}].args`,
            `--stage_id=${id}, but ${idOf(svc)} is discovered by stages[${index}] (${stage.name}): expected --stage_id=${index}`);
        }
      });
      if (!w.containers.some((c) => flagsOf(c).has("stage_id"))) {
        report(w.obj, "spec.template.spec.containers[*].args", `no container passes --stage_id (its ${idOf(svc)} is discovered by stages[${index}])`);
      }
    }
  });
}

// --- main ------------------------------------------------------------------

const objects = readInputs(process.argv.slice(2));
for (const obj of objects) {
  for (const p of await checkSchema(obj)) report(obj, p.path, p.message);
  if (!obj?.metadata?.name) report(obj, "metadata.name", "required field missing");
}

const ofKind = (kind) => objects.filter((o) => o?.kind === kind);
const configMaps = new Map(ofKind("ConfigMap").map((c) => [c.metadata?.name, c]));
const services = ofKind("Service");
const secrets = new Map(ofKind("Secret").map((s) => [s.metadata?.name, s]));
const workloads = objects
  .filter((o) => WORKLOAD_KINDS.has(o?.kind))
  .map((w) => checkWorkload(w, configMaps))
  .filter(Boolean);
const serviceTargets = new Map(services.map((s) => [s, checkService(s, workloads)]));
ofKind("PodDisruptionBudget").forEach((pdb) => checkPdb(pdb, workloads));
// A StatefulSet's governing Service: it must exist and select its pods.
for (const w of workloads.filter((x) => x.obj.kind === "StatefulSet")) {
  const name = w.obj.spec.serviceName;
  if (!name) continue; // the schema check reports it where required
  const svc = services.find((s) => s.metadata?.name === name);
  if (!svc) report(w.obj, "spec.serviceName", `${name} names no Service of the rendered output`);
  else if (!(serviceTargets.get(svc) ?? []).includes(w)) report(w.obj, "spec.serviceName", `${idOf(svc)} does not select its pods`);
}
checkBatchServices({ services, serviceTargets, flagsOf, idOf, report });

let pipelines = 0;
let workers = 0;
let withPeers = 0;
let gateways = 0;
let batchGateways = 0;
const pipelineConfigs = [];
for (const w of workloads) {
  for (const [ci, c] of w.containers.entries()) {
    const flags = flagsOf(c);
    checkSecurity(w, c, ci, flags, secrets);
    if (isGatewayFlags(flags)) {
      if (checkGateway(w, c, ci, flags, services, serviceTargets, secrets)) gateways++;
      if (flags.get("batch_database")) {
        checkBatchStore({ w, c, ci, flags, mountOf, report });
        batchGateways++;
      }
    }
    if (flags.has("stage_id")) {
      workers++;
      const drain = Number(flags.get("drain_timeout_ms") ?? WORKER_DRAIN_DEFAULT_MS);
      checkGrace(w, c, drain, "--drain_timeout_ms");
    }
    if (flags.has("config")) {
      const cfg = mountedConfig(w, c, flags.get("config"), configMaps);
      if (cfg) {
        pipelines++;
        pipelineConfigs.push(cfg);
        checkPipeline(w, c, cfg, services, workloads, serviceTargets);
        if (checkPeers(w, c, ci, cfg, services, serviceTargets, secrets)) withPeers++;
      }
    }
  }
}

const stageIdOf = (w) => w.containers.map((c) => flagsOf(c).get("stage_id")).find((id) => id !== undefined);
const tracing = checkTracing({ workloads, configMaps, report });
const scaling = checkAutoscalers({ objects, workloads, stageIdOf, pipelines: pipelineConfigs, adapterConfigs, report, problems });

if (problems.length) {
  for (const p of problems) console.log(`FAIL ${p}`);
  console.log(`validate: ${problems.length} problem(s) in ${objects.length} object(s)`);
  process.exit(1);
}
const kinds = {};
for (const o of objects) kinds[o.kind] = (kinds[o.kind] ?? 0) + 1;
console.log(
  `validate: OK: ${objects.length} objects (${Object.entries(kinds).map(([k, n]) => `${n} ${k}`).join(", ")}); ` +
    `${pipelines} pipeline config(s) checked against ${workers} stage worker container(s), ${withPeers} with peers; ` +
    `${gateways} gateway container(s) checked against their orchestrator, ${batchGateways} with a batch database; ` +
    `${scaling.scaledObjects + scaling.hpas} autoscaler(s) (${scaling.scaledObjects} ScaledObject, ${scaling.hpas} HorizontalPodAutoscaler) ` +
    `checked against ${scaling.workers} stage worker Deployment(s), ${scaling.adapterServed} External metric(s) served by a prometheus-adapter rule; ` +
    `${tracing} container(s) export traces`,
);
