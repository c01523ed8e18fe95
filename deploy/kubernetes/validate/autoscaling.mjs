// The autoscalers of the stage workers, against the rest of the rendered
// output: KEDA ScaledObjects (keda.sh/v1alpha1, prometheus triggers) and
// HorizontalPodAutoscalers (autoscaling/v2, External metrics served by
// prometheus-adapter). Part of validate.mjs, which checks their schemas.
//
// For each autoscaler: its scaleTargetRef is a Deployment of the rendered
// output that runs a stage_worker (passes --stage_id), without replicas: of
// its own; it scales on one of the orchestrator's scaling gauges
// (docs/observability.md), aggregated over the orchestrators as that gauge
// needs (GAUGES) and with the target type it needs; the gauge's stage label
// names a stage of the orchestrator's pipeline config, the very stage whose
// --stage_id the target passes; the threshold or averageValue is a positive
// number; minReplicaCount/minReplicas is at least 1 (no scale to zero) and at
// most the maximum; a scale-down stabilization window is set. When there are
// any, every stage worker Deployment has exactly one. With a prometheus-adapter
// config in the input (a document that is no Kubernetes object but has
// rules.external, as the chart's values, or externalRules, as the adapter's
// config.yaml), each HPA's External metric must be served by one of its rules,
// which passes the HPA's selector on (<<.LabelMatchers>>) and aggregates as
// the gauge needs.

// The orchestrator's per stage scaling gauges: how a query must aggregate them
// over the orchestrator replicas, and the target type their value calls for.
const GAUGES = {
  omnistage_stage_demand_replicas: {
    aggregate: ["sum"],
    type: "AverageValue",
    why: "each orchestrator measures the demand it routes: the stage's demand is their sum",
  },
  omnistage_stage_audio_demand_replicas: {
    aggregate: ["sum"],
    type: "AverageValue",
    why: "each orchestrator measures the audio streams it routes: the stage's audio demand is their sum",
  },
  omnistage_stage_recommended_replicas: {
    aggregate: ["max"],
    type: "AverageValue",
    why: "each orchestrator's own view, rounded up: a sum counts them once per orchestrator (sum omnistage_stage_demand_replicas instead)",
  },
  omnistage_stage_saturation: {
    aggregate: ["max", "avg"],
    type: "Value",
    why: "a ratio to the live replicas' capacity, the same for every orchestrator",
  },
};
const GAUGE_NAMES = Object.keys(GAUGES).join(", ");
const KEDA_DEFAULT_MIN = 0; // KEDA's minReplicaCount default: scale to zero
const KEDA_DEFAULT_MAX = 100;
const HPA_DEFAULT_MIN = 1;

// A Kubernetes quantity ("1", "500m", "2k", "1.5") as a number, or NaN.
export function parseQuantity(q) {
  if (typeof q === "number") return q;
  const m = /^([+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)?$/.exec(String(q ?? ""));
  if (!m) return NaN;
  const scale = { n: 1e-9, u: 1e-6, m: 1e-3, k: 1e3, M: 1e6, G: 1e9, T: 1e12, P: 1e15, E: 1e18, Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, Ti: 2 ** 40, Pi: 2 ** 50, Ei: 2 ** 60 };
  return Number(m[1]) * (m[2] ? scale[m[2]] : 1);
}

// A PromQL query's omnistage metric selectors: [{metric, matchers: [{label, op, value}]}].
function selectorsOf(query) {
  const found = [];
  for (const m of String(query).matchAll(/\b(omnistage_[A-Za-z0-9_:]*)\s*(?:\{([^}]*)\})?/g)) {
    const matchers = [];
    for (const l of (m[2] ?? "").matchAll(/([A-Za-z_][A-Za-z0-9_]*)\s*(=~|!=|!~|=)\s*"((?:[^"\\]|\\.)*)"/g)) {
      matchers.push({ label: l[1], op: l[2], value: l[3] });
    }
    found.push({ metric: m[1], matchers });
  }
  return found;
}

// The outermost aggregation of a query ("sum", "max", ...), or null.
const aggregationOf = (query) =>
  /^\s*(sum|max|min|avg|count|topk|bottomk|quantile)\b\s*(?:(?:by|without)\s*\([^)]*\)\s*)?\(/.exec(String(query))?.[1] ?? null;

const get = (obj, path) => path.split(".").reduce((o, k) => (o === null || o === undefined ? undefined : o[k]), obj);

// ctx: {objects, workloads, stageIdOf(w) -> string|undefined, pipelines:
// [{name, key, config}], report(obj, path, message), problems: string[]}.
// Returns the summary's counts.
export function checkAutoscalers(ctx) {
  const { objects, workloads, stageIdOf, pipelines, report, problems } = ctx;
  const scaledObjects = objects.filter((o) => o?.kind === "ScaledObject" && String(o.apiVersion).startsWith("keda.sh/"));
  const hpas = objects.filter((o) => o?.kind === "HorizontalPodAutoscaler");
  const adapterRules = ctx.adapterConfigs.flatMap((c) => c.rules?.external ?? c.externalRules ?? []);
  const deployments = workloads.filter((w) => w.obj.kind === "Deployment");
  const workers = deployments.filter((w) => stageIdOf(w) !== undefined);
  const scaledBy = new Map(workers.map((w) => [w, []]));
  let adapterServed = 0;
  const ruleChecked = new Map(); // prometheus-adapter rule -> whether it passed

  // The stage named `stage` in the pipeline configs: [{cfg, index}].
  const stagesNamed = (stage) =>
    pipelines.flatMap((cfg) =>
      (Array.isArray(cfg.config.stages) ? cfg.config.stages : [])
        .map((s, index) => ({ cfg, index, name: s?.name }))
        .filter((s) => s.name === stage));
  const stageList = () =>
    pipelines.map((cfg) => `ConfigMap/${cfg.name} ${cfg.key} has: ${(cfg.config.stages ?? []).map((s) => s?.name).join(", ")}`).join("; ");

  // The target: a stage worker Deployment of the rendered output.
  function target(a, ref, at) {
    const kind = ref?.kind ?? (a.kind === "ScaledObject" ? "Deployment" : undefined);
    if (kind !== "Deployment") {
      report(a, `${at}.kind`, `${kind ?? "unset"}: the stage workers are Deployments`);
      return null;
    }
    const w = deployments.find((d) => d.obj.metadata?.name === ref?.name);
    if (!w) {
      report(a, `${at}.name`, `${ref?.name} names no Deployment of the rendered output`);
      return null;
    }
    if (stageIdOf(w) === undefined) {
      report(a, `${at}.name`, `Deployment/${ref.name} runs no stage_worker (no container passes --stage_id): only a stage's workers scale on its demand`);
      return null;
    }
    scaledBy.get(w).push(a);
    return w;
  }

  // One gauge reference: a scaling gauge, of one stage, the target's.
  function checkGauge(a, at, metric, stageMatcher, w, type) {
    const gauge = GAUGES[metric];
    if (!gauge) {
      report(a, at, `${metric} is none of the orchestrator's scaling gauges (${GAUGE_NAMES})`);
      return null;
    }
    if (type !== gauge.type) {
      report(a, at, `${metric} needs target type ${gauge.type}, not ${type}` +
        (gauge.type === "AverageValue" ? " (a replica count: the HPA then asks for ceil(value / target) replicas)" : " (a ratio: the HPA then scales the current replicas by value / target)"));
    }
    if (!stageMatcher) {
      report(a, at, `${metric} is not narrowed to one stage (stage="<name>"): it would scale on every stage's demand at once`);
      return gauge;
    }
    const stage = stageMatcher.value;
    if (!pipelines.length) {
      report(a, at, `stage="${stage}": no orchestrator pipeline config in the input to find it in`);
      return gauge;
    }
    const found = stagesNamed(stage);
    if (!found.length) {
      report(a, at, `stage="${stage}" names no stage of the pipeline config (${stageList()})`);
      return gauge;
    }
    const id = w && stageIdOf(w);
    if (w && !found.some((s) => String(s.index) === String(id))) {
      const served = pipelines.flatMap((cfg) => cfg.config.stages?.[Number(id)]?.name ?? []);
      report(a, at, `stage="${stage}" is stages[${found[0].index}] of ConfigMap/${found[0].cfg.name} ${found[0].cfg.key}, ` +
        `but its target Deployment/${w.obj.metadata.name} passes --stage_id=${id}${served.length ? ` (${served[0]})` : ""}: it would scale on another stage's demand`);
    }
    return gauge;
  }

  function checkCommon(a, w, min, minAt, minDefault, max, maxAt, window, windowAt) {
    const effective = min ?? minDefault;
    if (!(effective >= 1)) {
      report(a, minAt, `${min ?? `unset (the default is ${minDefault})`}: scale to zero is not supported ` +
        `(a stage with no replica fails every request, and the orchestrator is not ready without one): set 1 or more`);
    }
    if (max !== undefined && max < effective) report(a, maxAt, `${max} is below the minimum ${effective}`);
    if (window === undefined || window === null) {
      report(a, windowAt, `not set: set a scale-down stabilization window (e.g. 300) so the stage does not flap ` +
        `(each removed worker drains its requests, and a new one is used only once DNS lists it)`);
    } else if (!(window > 0)) {
      report(a, windowAt, `${window}: scale-down is not stabilized, so the stage flaps with its demand: use e.g. 300`);
    }
    if (w && w.obj.spec?.replicas !== undefined) {
      report(w.obj, "spec.replicas", `${w.obj.spec.replicas} is set, but ${a.kind}/${a.metadata?.name} scales this Deployment: ` +
        `every kubectl apply resets it to ${w.obj.spec.replicas} until the autoscaler acts again (remove it, as overlays/keda/no-replicas.yaml does)`);
    }
  }

  for (const a of scaledObjects) {
    const spec = a.spec ?? {};
    const w = target(a, spec.scaleTargetRef, "spec.scaleTargetRef");
    let gauges = 0;
    (Array.isArray(spec.triggers) ? spec.triggers : []).forEach((t, ti) => {
      if (t?.type !== "prometheus") return;
      const at = `spec.triggers[${ti}].metadata`;
      const md = t.metadata ?? {};
      if (!/^https?:\/\/[^/\s]+/.test(String(md.serverAddress ?? ""))) {
        report(a, `${at}.serverAddress`, `${md.serverAddress ?? "unset"}: needs the URL of the Prometheus that scrapes the orchestrators`);
      }
      const threshold = md.threshold;
      if (!(/^\s*[0-9.eE+-]+\s*$/.test(String(threshold ?? "")) && Number(threshold) > 0)) {
        report(a, `${at}.threshold`, `${threshold ?? "unset"}: must be a positive number (KEDA parses it as a float)`);
      }
      const query = md.query;
      if (typeof query !== "string" || !query.trim()) {
        report(a, `${at}.query`, `unset: the trigger needs a query`);
        return;
      }
      const selectors = selectorsOf(query);
      if (!selectors.length) {
        report(a, `${at}.query`, `${query}: names none of the orchestrator's scaling gauges (${GAUGE_NAMES})`);
        return;
      }
      if (selectors.length > 1) {
        report(a, `${at}.query`, `${query}: names ${selectors.length} omnistage metrics: scale on one gauge per trigger`);
      }
      const { metric, matchers } = selectors[0];
      const stage = matchers.find((m) => m.label === "stage" && m.op === "=");
      const gauge = checkGauge(a, `${at}.query`, metric, stage, w, t.metricType ?? "AverageValue");
      if (!gauge) return;
      gauges++;
      const agg = aggregationOf(query);
      if (!gauge.aggregate.includes(agg)) {
        report(a, `${at}.query`, `${query}: ${agg ? `${agg}(...)` : "not aggregated"}: ${metric} must be ` +
          `${gauge.aggregate.map((x) => `${x}(...)`).join(" or ")} over the orchestrators (${gauge.why}); KEDA takes a query's one element`);
      }
    });
    if (!gauges) {
      report(a, "spec.triggers", `no prometheus trigger on the orchestrator's scaling gauges (${GAUGE_NAMES})`);
    }
    const windowPath = "spec.advanced.horizontalPodAutoscalerConfig.behavior.scaleDown.stabilizationWindowSeconds";
    checkCommon(a, w, spec.minReplicaCount, "spec.minReplicaCount", KEDA_DEFAULT_MIN, spec.maxReplicaCount ?? KEDA_DEFAULT_MAX,
      "spec.maxReplicaCount", get(a, windowPath), windowPath);
  }

  for (const a of hpas) {
    const spec = a.spec ?? {};
    const w = target(a, spec.scaleTargetRef, "spec.scaleTargetRef");
    let gauges = 0;
    (Array.isArray(spec.metrics) ? spec.metrics : []).forEach((m, mi) => {
      if (m?.type !== "External" || !m.external) return;
      const at = `spec.metrics[${mi}].external`;
      const metric = m.external.metric?.name;
      const selector = m.external.metric?.selector ?? {};
      const stageValue = selector.matchLabels?.stage ??
        (selector.matchExpressions ?? []).find((e) => e.key === "stage" && e.operator === "In" && e.values?.length === 1)?.values[0];
      const targetSpec = m.external.target ?? {};
      const gauge = checkGauge(a, `${at}.metric`, metric, stageValue === undefined ? null : { value: stageValue }, w, targetSpec.type);
      if (!gauge) return;
      gauges++;
      const value = targetSpec.type === "AverageValue" ? targetSpec.averageValue : targetSpec.value;
      if (!(parseQuantity(value) > 0)) {
        report(a, `${at}.target.${targetSpec.type === "AverageValue" ? "averageValue" : "value"}`, `${value ?? "unset"}: must be a positive quantity`);
      }
      if (ctx.adapterConfigs.length && checkAdapterRule(a, `${at}.metric.name`, metric, gauge)) adapterServed++;
    });
    if (!gauges) report(a, "spec.metrics", `no External metric on the orchestrator's scaling gauges (${GAUGE_NAMES})`);
    checkCommon(a, w, spec.minReplicas, "spec.minReplicas", HPA_DEFAULT_MIN, spec.maxReplicas, "spec.maxReplicas",
      spec.behavior?.scaleDown?.stabilizationWindowSeconds, "spec.behavior.scaleDown.stabilizationWindowSeconds");
  }

  // The prometheus-adapter rule serving an HPA's External metric.
  function checkAdapterRule(a, at, metric, gauge) {
    const serving = adapterRules.filter((r) => {
      const series = String(r?.seriesQuery ?? "");
      const byName = new RegExp(`(^|[^A-Za-z0-9_:])${metric}([^A-Za-z0-9_:]|$)`).test(series) ||
        [...series.matchAll(/__name__\s*=~\s*"((?:[^"\\]|\\.)*)"/g)].some(([, re]) => new RegExp(`^(?:${re})$`).test(metric));
      if (!byName) return false;
      if (!r.name?.matches) return true;
      const re = new RegExp(r.name.matches);
      return re.test(metric) && metric.replace(re, r.name.as || "$0") === metric;
    });
    if (!serving.length) {
      report(a, at, `${metric}: no external rule of the prometheus-adapter config serves it ` +
        `(rules.external of the chart's values, or externalRules): the HPA would find no metric`);
      return false;
    }
    const rule = serving[0];
    if (ruleChecked.has(rule)) return ruleChecked.get(rule); // reported once per rule
    const query = String(rule.metricsQuery ?? "");
    let ok = true;
    if (!query.includes("<<.LabelMatchers>>")) {
      problems.push(`prometheus-adapter rule for ${metric}: metricsQuery ${query}: lacks <<.LabelMatchers>>, so the HPA's ` +
        `selector (its stage) and namespace do not reach Prometheus: every stage would read the same sum`);
      ok = false;
    }
    const agg = aggregationOf(query);
    if (!gauge.aggregate.includes(agg)) {
      problems.push(`prometheus-adapter rule for ${metric}: metricsQuery ${query}: must be ` +
        `${gauge.aggregate.map((x) => `${x} by (stage) (...)`).join(" or ")} (${gauge.why})`);
      ok = false;
    }
    ruleChecked.set(rule, ok);
    return ok;
  }

  const autoscalers = scaledObjects.length + hpas.length;
  if (autoscalers) {
    for (const [w, by] of scaledBy) {
      if (!by.length) {
        report(w.obj, "", `a stage worker (--stage_id=${stageIdOf(w)}) that no autoscaler scales, while others are autoscaled: give it one too`);
      } else if (by.length > 1) {
        report(w.obj, "", `scaled by ${by.length} autoscalers (${by.map((a) => `${a.kind}/${a.metadata?.name}`).join(", ")}): they would fight over its replicas`);
      }
    }
  }
  return { scaledObjects: scaledObjects.length, hpas: hpas.length, workers: workers.length, adapterServed };
}
