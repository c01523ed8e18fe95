// The official OpenAI SDK (npm `openai`, unchanged) against the omnistage
// gateway: what a user of it would do. Run by gateway/openai_sdk_test.sh:
//
//   node sdk_test.mjs <gateway base URL> <output dir> <check>
//
// Checks (each prints one JSON line and exits non-zero on failure):
//   stream      text + audio streamed; writes stream.txt and stream.wav
//   whole       the same, not streamed; writes whole.txt and whole.wav
//   errors      each refusal arrives as the SDK's typed error with its status
//   disconnect  stops reading after the first chunk (the gateway must abort)
//   concurrent  512 streams at once, every one complete
//   limited     (an orchestrator admitting one request) a second one is 429
//   rate_limited (a token allowed one request per 2 s) a second one at once is
//               RateLimitError with Retry-After and retry-after-ms; the SDK's own
//               retries wait that long and then succeed
//   unavailable (no orchestrator answers) a request is 503
import fs from "node:fs";
import path from "node:path";
import OpenAI from "openai";

const [base, out, check] = process.argv.slice(2);
const apiKey = process.env.OMNISTAGE_TOKEN || "unused-without-tokens";
const client = new OpenAI({ baseURL: `${base}/v1`, apiKey, maxRetries: 0, timeout: 120000 });
const model = process.env.OMNISTAGE_MODEL || "omni-demo";
const request = {
  model,
  messages: [{ role: "user", content: "Tell me about the sea." }],
  modalities: ["text", "audio"],
  audio: { voice: "alloy", format: "wav" },
  max_tokens: 24,
  seed: 7,
};

function fail(message) {
  console.log(JSON.stringify({ check, ok: false, message }));
  process.exit(1);
}

async function stream() {
  const chunks = await client.chat.completions.create({
    ...request, stream: true, stream_options: { include_usage: true },
  });
  let text = "";
  const audio = [];
  let finish = null;
  let usage = null;
  let events = 0;
  for await (const chunk of chunks) {
    events += 1;
    if (chunk.usage) usage = chunk.usage;
    const choice = chunk.choices[0];
    if (!choice) continue;
    if (choice.delta?.content) text += choice.delta.content;
    if (choice.delta?.audio?.data) audio.push(Buffer.from(choice.delta.audio.data, "base64"));
    if (choice.finish_reason) finish = choice.finish_reason;
  }
  if (!finish) fail("no finish_reason");
  if (!usage || usage.completion_tokens < 1) fail(`no usage: ${JSON.stringify(usage)}`);
  fs.writeFileSync(path.join(out, "stream.txt"), text);
  fs.writeFileSync(path.join(out, "stream.wav"), Buffer.concat(audio));
  return { events, finish, chars: text.length, audio_bytes: Buffer.concat(audio).length };
}

async function whole() {
  const completion = await client.chat.completions.create(request);
  const message = completion.choices[0].message;
  if (!message.audio?.data) fail("no audio in the message");
  fs.writeFileSync(path.join(out, "whole.txt"), message.content);
  fs.writeFileSync(path.join(out, "whole.wav"), Buffer.from(message.audio.data, "base64"));
  return { finish: completion.choices[0].finish_reason, usage: completion.usage };
}

// Each call must fail with the SDK's error class for its status.
async function errors() {
  const cases = [
    [{ ...request, model: "gpt-4o" }, OpenAI.NotFoundError, 404, "model"],
    [{ ...request, max_tokens: "many" }, OpenAI.BadRequestError, 400, "max_tokens"],
    [{ ...request, messages: [] }, OpenAI.BadRequestError, 400, "messages"],
    [{ ...request, audio: { voice: "alloy", format: "mp3" } }, OpenAI.BadRequestError, 400,
     "audio.format"],
  ];
  if (process.env.OMNISTAGE_TOKEN) {
    const stranger = new OpenAI({ baseURL: `${base}/v1`, apiKey: "not-a-token-of-ours",
                                  maxRetries: 0 });
    try {
      await stranger.chat.completions.create(request);
      fail("an unknown token was served");
    } catch (e) {
      if (!(e instanceof OpenAI.AuthenticationError) || e.status !== 401) {
        fail(`unknown token: ${e.constructor.name} ${e.status}`);
      }
    }
  }
  for (const [body, type, status, param] of cases) {
    try {
      await client.chat.completions.create(body);
      fail(`${param}: served`);
    } catch (e) {
      if (!(e instanceof type) || e.status !== status || e.param !== param ||
          !e.error?.message || !e.error?.type) {
        fail(`${param}: got ${e.constructor.name} ${e.status} ${JSON.stringify(e.error)}`);
      }
    }
  }
  return { cases: cases.length };
}

async function disconnect() {
  const controller = new AbortController();
  const chunks = await client.chat.completions.create(
    { ...request, max_tokens: 1000, stream: true }, { signal: controller.signal });
  try {
    for await (const chunk of chunks) {
      if (chunk.choices[0]?.delta?.content) controller.abort();
    }
  } catch (e) {
    if (!(e instanceof OpenAI.APIUserAbortError) && e.name !== "AbortError") throw e;
  }
  return { aborted: controller.signal.aborted };
}

async function concurrent() {
  const streams = 512;
  const one = async (i) => {
    const chunks = await client.chat.completions.create({
      model, messages: [{ role: "user", content: `Stream ${i}` }], max_tokens: 8, stream: true,
    });
    let text = "";
    let finish = null;
    for await (const chunk of chunks) {
      text += chunk.choices[0]?.delta?.content || "";
      finish = chunk.choices[0]?.finish_reason || finish;
    }
    return text.length > 0 && finish !== null;
  };
  const done = await Promise.all(Array.from({ length: streams }, (_, i) => one(i)));
  const complete = done.filter(Boolean).length;
  if (complete !== streams) fail(`${streams - complete} of ${streams} streams incomplete`);
  return { streams, complete };
}

// Against an orchestrator whose limits admit one request in flight.
async function limited() {
  const controller = new AbortController();
  const first = await client.chat.completions.create(
    { ...request, modalities: ["text"], max_tokens: 1000, stream: true },
    { signal: controller.signal });
  const iterator = first[Symbol.asyncIterator]();
  await iterator.next();  // It runs.
  try {
    await client.chat.completions.create({ ...request, modalities: ["text"] });
    fail("a second request was admitted");
  } catch (e) {
    if (!(e instanceof OpenAI.RateLimitError) || e.status !== 429 || e.code !== "rate_limit_exceeded") {
      fail(`second request: ${e.constructor.name} ${e.status} ${JSON.stringify(e.error)}`);
    }
  }
  controller.abort();
  return { status: 429 };
}

async function rate_limited() {
  const small = { ...request, modalities: ["text"], max_tokens: 2 };
  await client.chat.completions.create(small);
  let hint_ms = 0;
  try {
    await client.chat.completions.create(small);
    fail("a second request within the rate was admitted");
  } catch (e) {
    if (!(e instanceof OpenAI.RateLimitError) || e.status !== 429) {
      fail(`second request: ${e.constructor.name} ${e.status} ${JSON.stringify(e.error)}`);
    }
    hint_ms = Number(e.headers?.get?.("retry-after-ms") ?? e.headers?.["retry-after-ms"]);
    const seconds = Number(e.headers?.get?.("retry-after") ?? e.headers?.["retry-after"]);
    if (!(hint_ms > 0 && hint_ms <= 2000 && seconds === Math.ceil(hint_ms / 1000))) {
      fail(`no usable retry headers: retry-after-ms ${hint_ms}, retry-after ${seconds}`);
    }
    if (!e.message.includes("per second")) fail(`the message does not name the rate: ${e.message}`);
  }
  // The SDK retries a 429 by itself, after the time the headers say.
  const patient = new OpenAI({ baseURL: `${base}/v1`, apiKey, maxRetries: 3, timeout: 120000 });
  const start = Date.now();
  await patient.chat.completions.create(small);
  return { status: 429, retry_after_ms: hint_ms, retried_after_ms: Date.now() - start };
}

// With no orchestrator behind the gateway.
async function unavailable() {
  try {
    await client.chat.completions.create(request);
    fail("served without an orchestrator");
  } catch (e) {
    if (!(e instanceof OpenAI.InternalServerError) || e.status !== 503 ||
        e.error?.type !== "server_error") {
      fail(`${e.constructor.name} ${e.status} ${JSON.stringify(e.error)}`);
    }
  }
  return { status: 503 };
}

const checks = { stream, whole, errors, disconnect, concurrent, limited, rate_limited,
                 unavailable };
if (!checks[check]) fail(`unknown check '${check}'`);
try {
  console.log(JSON.stringify({ check, ok: true, ...(await checks[check]()) }));
} catch (e) {
  fail(`${e.constructor.name}: ${e.message}`);
}
