// An OTLP/HTTP trace receiver that reads what it is sent with OpenTelemetry's
// own generated protobuf definitions (npm @opentelemetry/otlp-transformer's
// opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest), not ours.
//
//   node receiver.mjs SPANS_FILE
//
// Listens on 127.0.0.1 (a port of its own, printed as "listening port=N"),
// takes POST /v1/traces with a protobuf body (gzip allowed), and appends each
// span to SPANS_FILE as a line of JSON: service (its resource's service.name),
// traceId, spanId, parentSpanId (hex), traceState, name, kind, attributes,
// events ({name, attributes}), status ({code, message}). A body that does not
// decode is a 400 and a line on stderr.
import { createRequire } from "node:module";
import { appendFileSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import { gunzipSync } from "node:zlib";

const require = createRequire(import.meta.url);
const { opentelemetry } = require("@opentelemetry/otlp-transformer/build/src/generated/root.js");
const { ExportTraceServiceRequest, ExportTraceServiceResponse } =
  opentelemetry.proto.collector.trace.v1;

const spansFile = process.argv[2];
if (!spansFile) {
  console.error("usage: node receiver.mjs SPANS_FILE");
  process.exit(2);
}
writeFileSync(spansFile, "");

const hex = (bytes) => Buffer.from(bytes ?? []).toString("hex");

// An AnyValue as plain JSON (an int64 as a number: ours fit).
function valueOf(any) {
  if (!any) return null;
  if (any.stringValue != null) return any.stringValue;
  if (any.boolValue != null) return any.boolValue;
  if (any.intValue != null) return Number(any.intValue.toString());
  if (any.doubleValue != null) return any.doubleValue;
  if (any.arrayValue) return (any.arrayValue.values ?? []).map(valueOf);
  if (any.bytesValue) return hex(any.bytesValue);
  return null;
}

function attributesOf(list) {
  const out = {};
  for (const kv of list ?? []) out[kv.key] = valueOf(kv.value);
  return out;
}

function record(request) {
  const lines = [];
  for (const resourceSpans of request.resourceSpans ?? []) {
    const service = attributesOf(resourceSpans.resource?.attributes)["service.name"] ?? "";
    for (const scopeSpans of resourceSpans.scopeSpans ?? []) {
      for (const span of scopeSpans.spans ?? []) {
        lines.push(JSON.stringify({
          service,
          traceId: hex(span.traceId),
          spanId: hex(span.spanId),
          parentSpanId: hex(span.parentSpanId),
          traceState: span.traceState ?? "",
          name: span.name,
          kind: span.kind ?? 0,
          attributes: attributesOf(span.attributes),
          events: (span.events ?? []).map((e) => ({ name: e.name, attributes: attributesOf(e.attributes) })),
          status: { code: span.status?.code ?? 0, message: span.status?.message ?? "" },
        }));
      }
    }
  }
  if (lines.length) appendFileSync(spansFile, lines.join("\n") + "\n");
  return lines.length;
}

const server = createServer((req, res) => {
  if (req.method !== "POST" || req.url !== "/v1/traces") {
    res.writeHead(404).end();
    return;
  }
  const chunks = [];
  req.on("data", (c) => chunks.push(c));
  req.on("end", () => {
    let body = Buffer.concat(chunks);
    try {
      if (req.headers["content-encoding"] === "gzip") body = gunzipSync(body);
      if (!String(req.headers["content-type"]).startsWith("application/x-protobuf")) {
        throw new Error(`content-type ${req.headers["content-type"]}`);
      }
      record(ExportTraceServiceRequest.decode(body));
    } catch (e) {
      console.error(`receiver: a body of ${body.length} bytes did not decode: ${e.message}`);
      res.writeHead(400).end();
      return;
    }
    const reply = ExportTraceServiceResponse.encode({}).finish();
    res.writeHead(200, { "Content-Type": "application/x-protobuf" }).end(Buffer.from(reply));
  });
});
server.listen(0, "127.0.0.1", () => {
  console.log(`receiver: listening port=${server.address().port}`);
});
process.on("SIGTERM", () => server.close(() => process.exit(0)));
