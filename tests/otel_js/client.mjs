// A client traced by the OpenTelemetry JS SDK (tests/otel_js_test.sh): each of
// its chat completions through the gateway runs under a span of its own, whose
// context the SDK's W3C propagator puts in the request's traceparent and
// tracestate headers, and which the SDK's own OTLP/HTTP protobuf exporter
// sends to the receiver. Then it reads what the receiver decoded and checks
// each request's trace: one trace from this client's span through the
// gateway, the orchestrator and the stage's worker, every parent right, and a
// client cancel, an abort and a failover each there as what they were; and a
// Realtime session's response under the session's span, under the upgrade's.
//
//   node client.mjs GATEWAY_URL RECEIVER_URL SPANS_FILE OMNI ORCHESTRATOR WORKERS
//
// WORKERS: "PID@ADDRESS,PID@ADDRESS", the stage's replicas (the failover
// kills the one its request is bound to, found with `omni status --json`).
// Prints a JSON summary; exits 1 on the first failed check, saying which.
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { ROOT_CONTEXT, defaultTextMapSetter, trace } from "@opentelemetry/api";
import { TraceState, W3CTraceContextPropagator } from "@opentelemetry/core";
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-proto";
import { resourceFromAttributes } from "@opentelemetry/resources";
import { BasicTracerProvider, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base";
import WebSocket from "ws";

const [gateway, receiver, spansFile, omni, orchestrator, workerList] = process.argv.slice(2);
const workers = workerList.split(",").map((w) => {
  const [pid, address] = w.split("@");
  return { pid: Number(pid), address };
});

const provider = new BasicTracerProvider({
  resource: resourceFromAttributes({ "service.name": "sdk-client" }),
  spanProcessors: [new SimpleSpanProcessor(new OTLPTraceExporter({ url: receiver }))],
});
const tracer = provider.getTracer("omnistage-otel-js-test");
const propagator = new W3CTraceContextPropagator();
// The client's spans continue a remote caller's context that carries a
// vendor's tracestate, which every hop must keep.
const kTraceState = "vendor=opaque";

function fail(message) {
  console.log(JSON.stringify({ failed: message }));
  process.exit(1);
}
function check(condition, message) {
  if (!condition) fail(message);
}

// The POST of a chat completion under `span`; `onChunk(chunk)` sees each
// streamed chunk (return false to stop reading: the client goes away).
async function chat(span, body, onChunk) {
  const headers = { "Content-Type": "application/json" };
  propagator.inject(trace.setSpan(ROOT_CONTEXT, span), headers, defaultTextMapSetter);
  const controller = new AbortController();
  const response = await fetch(`${gateway}/v1/chat/completions`, {
    method: "POST",
    headers,
    body: JSON.stringify({ model: "omni-demo", messages: [{ role: "user", content: body.prompt }], ...body.extra }),
    signal: controller.signal,
  });
  if (response.status !== 200) fail(`${body.prompt}: HTTP ${response.status}: ${await response.text()}`);
  if (!body.extra.stream) return { headers, answer: await response.json() };
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffered = "";
  const chunks = [];
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    buffered += decoder.decode(value, { stream: true });
    let end;
    while ((end = buffered.indexOf("\n\n")) >= 0) {
      const event = buffered.slice(0, end);
      buffered = buffered.slice(end + 2);
      if (!event.startsWith("data: ") || event === "data: [DONE]") continue;
      const chunk = JSON.parse(event.slice(6));
      chunks.push(chunk);
      if (onChunk && (await onChunk(chunk)) === false) {
        controller.abort();
        return { headers, chunks };
      }
    }
  }
  return { headers, chunks };
}

// A request's id in the orchestrator: its completion's id less "chatcmpl-".
const requestIdOf = (id) => id.replace(/^chatcmpl-/, "");
const finishOf = (chunks) => chunks.map((c) => c.choices?.[0]?.finish_reason).find((f) => f);

// `name` under a client span of its own (a child of a remote parent carrying
// kTraceState); returns what `run(span)` returns, with the span's ids.
async function traced(name, run) {
  const parent = trace.setSpanContext(ROOT_CONTEXT, {
    traceId: [...crypto.getRandomValues(new Uint8Array(16))].map((b) => b.toString(16).padStart(2, "0")).join(""),
    spanId: "00f067aa0ba902b7",
    traceFlags: 1,
    isRemote: true,
    traceState: new TraceState(kTraceState),
  });
  const span = tracer.startSpan(`client ${name}`, {}, parent);
  try {
    const result = await run(span);
    return { ...result, traceId: span.spanContext().traceId, clientSpanId: span.spanContext().spanId };
  } finally {
    span.end();
  }
}

function omniCall(...args) {
  return execFileSync(omni, [...args, `--server=${orchestrator}`], { encoding: "utf8" });
}

// The replica (of `workers`) that request `id` is bound to, by the
// orchestrator's status: the one replica with a bound request.
function boundWorker() {
  const status = JSON.parse(omniCall("status", "--json"));
  const replicas = status.stages.flatMap((s) => s.replicas ?? []);
  const bound = replicas.filter((r) => (r.boundRequests ?? 0) > 0);
  check(bound.length === 1, `one replica should hold the request: ${JSON.stringify(replicas)}`);
  const worker = workers.find((w) => w.address === bound[0].address);
  check(worker, `no worker at ${bound[0].address}`);
  return worker;
}

const summary = {};
const short = { max_tokens: 20 };
const long = { stream: true, max_tokens: 2000 };

const plain = await traced("plain", async (span) => {
  const { headers, answer } = await chat(span, { prompt: "Tell me about the sea.", extra: short });
  check(headers.traceparent && headers.tracestate === kTraceState, `headers sent: ${JSON.stringify(headers)}`);
  return { requestId: requestIdOf(answer.id), finish: answer.choices[0].finish_reason };
});
summary.plain = plain;

const cancelled = await traced("cancel", async (span) => {
  let id = "";
  await chat(span, { prompt: "Talk for a long while.", extra: long }, (chunk) => {
    id = chunk.id;
    return false;  // the client goes away after the first chunk
  });
  return { requestId: requestIdOf(id) };
});
summary.cancel = cancelled;

const aborted = await traced("abort", async (span) => {
  let id = "";
  const { chunks } = await chat(span, { prompt: "Talk for a long while.", extra: long }, (chunk) => {
    if (!id) {
      id = chunk.id;
      omniCall("abort", `--ids=${requestIdOf(id)}`);
    }
  });
  return { requestId: requestIdOf(id), finish: finishOf(chunks) };
});
summary.abort = aborted;

const failedOver = await traced("failover", async (span) => {
  let id = "";
  let killed = null;
  const { chunks } = await chat(span, { prompt: "Talk for a long while.", extra: long }, (chunk) => {
    if (!id) {
      id = chunk.id;
      killed = boundWorker();
      process.kill(killed.pid, "SIGKILL");
    }
  });
  return { requestId: requestIdOf(id), finish: finishOf(chunks), killed: killed.address };
});
summary.failover = failedOver;

// A Realtime session of one text response, its upgrade under the client's span.
const realtime = await traced("realtime", async (span) => {
  const headers = {};
  propagator.inject(trace.setSpan(ROOT_CONTEXT, span), headers, defaultTextMapSetter);
  const socket = new WebSocket(`${gateway.replace(/^http/, "ws")}/v1/realtime`, { headers });
  const done = await new Promise((resolve) => {
    const timer = setTimeout(() => fail("realtime: no response.done within 30 s"), 30000);
    socket.on("error", (e) => fail(`realtime: ${e.message}`));
    socket.on("open", () => {
      const send = (event) => socket.send(JSON.stringify(event));
      send({ type: "session.update", session: { type: "realtime", output_modalities: ["text"], max_output_tokens: 20 } });
      send({ type: "conversation.item.create",
             item: { type: "message", role: "user", content: [{ type: "input_text", text: "Tell me about the sea." }] } });
      send({ type: "response.create" });
    });
    socket.on("message", (data) => {
      const event = JSON.parse(data.toString());
      if (event.type === "error") fail(`realtime: ${JSON.stringify(event)}`);
      if (event.type === "response.done") {
        clearTimeout(timer);
        resolve(event.response);
      }
    });
  });
  await new Promise((resolve) => {
    socket.on("close", resolve);
    socket.close();
  });
  return { responseId: done.id, status: done.status };
});
summary.realtime = realtime;
await provider.forceFlush();

// ---- The traces, as the receiver decoded them.
function spansOf(traceId) {
  return readFileSync(spansFile, "utf8").split("\n").filter((l) => l)
    .map((l) => JSON.parse(l)).filter((s) => s.traceId === traceId);
}
// Waits (up to 30 s) until `ready(spans)` holds for the trace's spans.
async function waitFor(traceId, ready, what) {
  for (let i = 0; i < 300; ++i) {
    const spans = spansOf(traceId);
    if (ready(spans)) return spans;
    await new Promise((r) => setTimeout(r, 100));
  }
  fail(`${what}: the spans did not come: ${JSON.stringify(spansOf(traceId), null, 1)}`);
}
const hasEvent = (span, name) => span.events.some((e) => e.name === name);
const one = (spans, pred, what) => {
  const found = spans.filter(pred);
  check(found.length === 1, `${what}: ${found.length} spans, not 1: ${JSON.stringify(spans, null, 1)}`);
  return found[0];
};

// The common tree: client span -> gateway's HTTP span -> Generate -> (its
// admission queue, if it waited, and) the stage span -> its worker's engine span(s); every
// parent in the trace, tracestate kept on every hop.
function tree(name, result, engines) {
  const spans = spansOf(result.traceId);
  const client = one(spans, (s) => s.service === "sdk-client", `${name}: client span`);
  check(client.spanId === result.clientSpanId, `${name}: the client's span id`);
  const http = one(spans, (s) => s.service === "gateway", `${name}: gateway span`);
  check(http.parentSpanId === client.spanId, `${name}: the gateway's span is not the client's child`);
  check(http.name === "POST /v1/chat/completions" && http.kind === 2, `${name}: gateway span ${http.name} kind ${http.kind}`);
  check(http.attributes["http.route"] === "/v1/chat/completions", `${name}: http.route`);
  const generate = one(spans, (s) => s.name === "Generate", `${name}: Generate`);
  check(generate.service === "orchestrator" && generate.parentSpanId === http.spanId,
    `${name}: Generate is not the gateway span's child`);
  check(generate.attributes["omnistage.request_id"] === result.requestId, `${name}: the request id`);
  // A request that waited for stage 0 has its wait as a span.
  for (const q of spans.filter((s) => s.name === "admission queue")) {
    check(q.parentSpanId === generate.spanId, `${name}: the admission queue is not Generate's child`);
  }
  const stage = one(spans, (s) => s.name === "stage thinker", `${name}: stage span`);
  check(stage.parentSpanId === generate.spanId, `${name}: the stage span is not Generate's child`);
  const engine = spans.filter((s) => s.name === "engine");
  check(engine.length === engines, `${name}: ${engine.length} engine spans, not ${engines}`);
  for (const e of engine) {
    check(e.service === "stage_worker" && e.parentSpanId === stage.spanId,
      `${name}: an engine span is not the stage span's child`);
  }
  const ids = new Set(spans.map((s) => s.spanId));
  for (const s of spans) {
    check(s === client || ids.has(s.parentSpanId), `${name}: ${s.name}'s parent is not in the trace`);
    check(s.traceState === kTraceState, `${name}: ${s.service} ${s.name}: tracestate "${s.traceState}"`);
  }
  return { http, generate, stage, engine };
}

const complete = (n) => (spans) => spans.filter((s) => s.name === "engine").length >= n &&
  ["sdk-client", "gateway", "orchestrator"].every((svc) => spans.some((s) => s.service === svc)) &&
  spans.some((s) => s.name === "Generate") && spans.some((s) => s.name.startsWith("stage "));

await waitFor(plain.traceId, complete(1), "plain");
{
  const t = tree("plain", plain, 1);
  check(t.http.attributes["http.response.status_code"] === 200, "plain: status code");
  check(hasEvent(t.engine[0], "first_output") && hasEvent(t.stage, "first_output"), "plain: first_output");
  check(t.generate.attributes["gen_ai.response.finish_reasons"] === plain.finish,
    `plain: finish ${t.generate.attributes["gen_ai.response.finish_reasons"]} vs ${plain.finish}`);
}

await waitFor(cancelled.traceId, (s) => complete(1)(s) && s.some((x) => x.name === "engine" && hasEvent(x, "aborted")), "cancel");
{
  const t = tree("cancel", cancelled, 1);
  check(hasEvent(t.http, "client_closed"), "cancel: the gateway's span has no client_closed");
  check(hasEvent(t.generate, "cancelled"), "cancel: Generate has no cancelled event");
}

await waitFor(aborted.traceId, (s) => complete(1)(s) && s.some((x) => x.name === "engine" && hasEvent(x, "aborted")), "abort");
{
  const t = tree("abort", aborted, 1);
  check(hasEvent(t.generate, "abort_requested"), "abort: Generate has no abort_requested");
  check(t.generate.attributes["gen_ai.response.finish_reasons"] === "abort", "abort: finish reason");
}

// The killed worker's spans died with it: one engine span, the survivor's.
await waitFor(failedOver.traceId, complete(1), "failover");
{
  const t = tree("failover", failedOver, 1);
  check(hasEvent(t.stage, "failover"), "failover: the stage span has no failover event");
  check(hasEvent(t.engine[0], "first_output"), "failover: the survivor's engine span has no first output");
  check(failedOver.finish === "length" || failedOver.finish === "stop", `failover: the client saw ${failedOver.finish}`);
}

// Realtime: client -> the upgrade's span (101) -> realtime session ->
// realtime response -> Generate -> stage -> engine.
await waitFor(realtime.traceId, (s) => s.some((x) => x.name === "realtime session") &&
  s.some((x) => x.name === "engine") && s.some((x) => x.name === "Generate"), "realtime");
{
  const spans = spansOf(realtime.traceId);
  const client = one(spans, (s) => s.service === "sdk-client", "realtime: client span");
  const upgrade = one(spans, (s) => s.name === "GET /v1/realtime", "realtime: the upgrade's span");
  check(upgrade.parentSpanId === client.spanId && upgrade.attributes["http.response.status_code"] === 101,
    `realtime: the upgrade's span: ${JSON.stringify(upgrade)}`);
  const session = one(spans, (s) => s.name === "realtime session", "realtime: session span");
  check(session.service === "gateway" && session.parentSpanId === upgrade.spanId, "realtime: the session span is not the upgrade's child");
  const response = one(spans, (s) => s.name === "realtime response", "realtime: response span");
  check(response.parentSpanId === session.spanId, "realtime: the response span is not the session's child");
  check(response.attributes["omnistage.realtime.response_id"] === realtime.responseId &&
    response.attributes["omnistage.realtime.status"] === realtime.status,
    `realtime: the response span says ${JSON.stringify(response.attributes)}, the client saw ${realtime.responseId} ${realtime.status}`);
  const generate = one(spans, (s) => s.name === "Generate", "realtime: Generate");
  check(generate.parentSpanId === response.spanId, "realtime: Generate is not the response span's child");
  const stage = one(spans, (s) => s.name === "stage thinker", "realtime: stage span");
  const engine = one(spans, (s) => s.name === "engine", "realtime: engine span");
  check(stage.parentSpanId === generate.spanId && engine.parentSpanId === stage.spanId, "realtime: stage and engine");
  for (const s of spans) check(s.traceState === kTraceState, `realtime: ${s.name}: tracestate "${s.traceState}"`);
}

await provider.shutdown();
console.log(JSON.stringify(summary));
