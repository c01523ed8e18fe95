// The OTEL_* settings each container gets (its env, and the ConfigMaps of its
// envFrom), checked as omnistage's binaries read them at startup
// (docs/observability.md#traces): a value they refuse is a pod that never
// starts. Returns how many containers export traces.
const PROTOCOLS = new Set(["grpc", "http/protobuf"]);
const SAMPLERS = new Set([
  "always_on", "always_off", "traceidratio",
  "parentbased_always_on", "parentbased_always_off", "parentbased_traceidratio",
]);

// name -> {value, at, configMap} of the variables container `c` gets as plain
// values (env wins over envFrom, as in Kubernetes; configMap: the ConfigMap
// it came from, if one).
function variablesOf(c, at, configMaps) {
  const vars = new Map();
  (c.envFrom ?? []).forEach((f, fi) => {
    const cm = f.configMapRef && configMaps.get(f.configMapRef.name);
    for (const [k, v] of Object.entries(cm?.data ?? {})) {
      vars.set((f.prefix ?? "") + k, {
        value: String(v), at: `${at}.envFrom[${fi}] (ConfigMap ${cm.metadata.name})`, configMap: cm.metadata.name,
      });
    }
  });
  (c.env ?? []).forEach((e, ei) => {
    if (e.value !== undefined) vars.set(e.name, { value: String(e.value), at: `${at}.env[${ei}]` });
  });
  return vars;
}

export function checkTracing({ workloads, configMaps, report }) {
  // A ConfigMap that sets OTEL_SERVICE_NAME for several workloads names all
  // their processes alike.
  const readers = new Map();
  for (const w of workloads) {
    for (const c of w.containers) {
      for (const f of c.envFrom ?? []) {
        const name = f.configMapRef?.name;
        if (name) readers.set(name, (readers.get(name) ?? new Set()).add(w.obj));
      }
    }
  }
  let tracing = 0;
  for (const w of workloads) {
    w.containers.forEach((c, ci) => {
      const vars = variablesOf(c, `spec.template.spec.containers[${ci}]`, configMaps);
      const get = (name) => vars.get(name)?.value ?? "";
      const bad = (name, message) => report(w.obj, vars.get(name).at, `${name}=${get(name)}: ${message}`);
      const from = vars.get("OTEL_SERVICE_NAME")?.configMap;
      const sharedBy = from ? readers.get(from).size : 0;
      if (sharedBy > 1) {
        bad("OTEL_SERVICE_NAME", `names the processes of all ${sharedBy} workloads reading ConfigMap ${from} alike (each names itself without it)`);
      }
      for (const name of ["OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"]) {
        if (vars.has(name) && !PROTOCOLS.has(get(name))) bad(name, "grpc or http/protobuf");
      }
      if (vars.has("OTEL_TRACES_SAMPLER") && !SAMPLERS.has(get("OTEL_TRACES_SAMPLER").toLowerCase())) {
        bad("OTEL_TRACES_SAMPLER", `one of ${[...SAMPLERS].join(", ")}`);
      }
      if (vars.has("OTEL_TRACES_SAMPLER_ARG") && get("OTEL_TRACES_SAMPLER").toLowerCase().endsWith("traceidratio")) {
        const ratio = Number(get("OTEL_TRACES_SAMPLER_ARG"));
        if (!(ratio >= 0 && ratio <= 1)) bad("OTEL_TRACES_SAMPLER_ARG", "a ratio in [0, 1]");
      }
      if (get("OTEL_SDK_DISABLED").toLowerCase() === "true" || get("OTEL_TRACES_EXPORTER").toLowerCase() === "none") return;
      const endpointName = ["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"].find((n) => get(n));
      if (!endpointName) return;
      const protocol = get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") || get("OTEL_EXPORTER_OTLP_PROTOCOL") || "http/protobuf";
      const endpoint = get(endpointName);
      if (protocol === "http/protobuf" && !/^https?:\/\/[^/:]+/.test(endpoint)) {
        bad(endpointName, "OTLP/HTTP needs an http:// or https:// URL (for gRPC set the protocol to grpc)");
        return;
      }
      if (protocol === "grpc" && !/^(https?:\/\/)?[^/]+/.test(endpoint)) {
        bad(endpointName, "names no host");
        return;
      }
      tracing++;
    });
  }
  return tracing;
}
