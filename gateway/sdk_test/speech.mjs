// The official OpenAI SDK (npm `openai`, unchanged) asking the omnistage
// gateway for speech, as a user of it would. Run by gateway/speech_sdk_test.sh:
//
//   node speech.mjs <gateway base URL> <output dir>
//
// Writes speech.<format> for every format the gateway serves (the SDK's
// audio.speech.create, read whole, and mp3 again read as a stream of
// chunks), speech.sse.pcm (stream_format "sse": the deltas' audio, joined),
// and refusals.json (each refusal as the SDK's typed error); prints one JSON
// line, and exits non-zero on failure.
import fs from "node:fs";
import path from "node:path";
import OpenAI from "openai";

const [base, out] = process.argv.slice(2);
const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: "unused", maxRetries: 0 });
const input = "The quick brown fox jumps over the lazy dog. Then it rests.";

function fail(message) {
  console.log(JSON.stringify({ ok: false, message }));
  process.exit(1);
}

const written = {};
for (const format of ["mp3", "opus", "flac", "wav", "pcm"]) {
  const response = await client.audio.speech.create({
    model: "tts-1", voice: "alloy", input, response_format: format,
  });
  const bytes = Buffer.from(await response.arrayBuffer());
  fs.writeFileSync(path.join(out, `speech.${format}`), bytes);
  written[format] = bytes.length;
}

// The body as a stream: more than one chunk arrives (it is not sent whole).
const streamed = await client.audio.speech.create({ model: "tts-1", voice: "onyx", input: `${input} ${input}` });
let chunks = 0;
for await (const chunk of streamed.body) chunks += chunk.length > 0 ? 1 : 0;
if (chunks < 2) fail(`the mp3 body came in ${chunks} chunk(s)`);

// stream_format "sse": speech.audio.delta events (base64 of the format's bytes),
// then speech.audio.done.
const sse = await client.audio.speech.create({
  model: "tts-1", voice: "alloy", input, response_format: "pcm", stream_format: "sse",
});
const text = await sse.text();
const events = text.split("\n").filter((l) => l.startsWith("data: ")).map((l) => JSON.parse(l.slice(6)));
if (events.at(-1)?.type !== "speech.audio.done") fail(`sse: no speech.audio.done: ${text.slice(-200)}`);
const audio = Buffer.concat(events.slice(0, -1).map((e) => {
  if (e.type !== "speech.audio.delta") fail(`sse: unexpected event ${e.type}`);
  return Buffer.from(e.audio, "base64");
}));
fs.writeFileSync(path.join(out, "speech.sse.pcm"), audio);

// Refusals, as the SDK's typed errors.
const refusals = {};
for (const [name, body] of Object.entries({
  voice: { model: "tts-1", voice: "nobody", input: "Hi" },
  format: { model: "tts-1", voice: "alloy", input: "Hi", response_format: "aac" },
  model: { model: "whisper-1", voice: "alloy", input: "Hi" },
})) {
  try {
    await client.audio.speech.create(body);
    fail(`${name}: accepted`);
  } catch (e) {
    if (!(e instanceof OpenAI.APIError)) fail(`${name}: ${e}`);
    refusals[name] = { status: e.status, param: e.param, type: e.constructor.name };
  }
}
fs.writeFileSync(path.join(out, "refusals.json"), JSON.stringify(refusals));
console.log(JSON.stringify({ ok: true, written, chunks, sse_events: events.length, refusals }));
