// The official OpenAI SDK (npm `openai`, unchanged) using the omnistage
// gateway's Batch API, as a user with offline work would. Run by
// gateway/batch_sdk_test.sh:
//
//   OMNISTAGE_TOKEN=<owner's token> OTHER_TOKEN=<another identity's> \
//     node batches.mjs <gateway base URL> <output dir> <phase> [lines]
//
// Phases (each prints one JSON line, and exits non-zero on failure):
//   run     a batch of 12 chat completions (two with audio) and one line
//           for a model not served, through files.create, batches.create and
//           batches.retrieve until it completes: every good custom_id once in
//           the output file, each answer what an interactive call of the same
//           body (the same seed) gives; the bad line alone in the error file;
//           another identity's retrieve, cancel and list see nothing; input
//           files that cannot run are refused at creation (the SDK's
//           BadRequestError with OpenAI's batch error code), an unknown file
//           is NotFoundError.
//   cancel  a batch of 200 longer lines cancelled once some ran: it ends
//           cancelled, each line once in the output or error file.
//   start   a batch of [lines] lines; writes <dir>/batch_id once some ran.
//   finish  waits for the batch <dir>/batch_id names to complete (the
//           gateway or orchestrator was killed meanwhile): every line once.
//   speech  (a gateway with a speech pipeline) a batch of /v1/audio/speech
//           lines: each answer's audio the bytes an interactive call gets;
//           writes <dir>/speech-s-<i>.<format>.
import fs from "node:fs";
import path from "node:path";
import OpenAI, { toFile } from "openai";

const [base, out, phase, count] = process.argv.slice(2);
const options = { baseURL: `${base}/v1`, maxRetries: 0, timeout: 120000 };
const owner = new OpenAI({ ...options, apiKey: process.env.OMNISTAGE_TOKEN });
const other = new OpenAI({ ...options, apiKey: process.env.OTHER_TOKEN });

function fail(message) {
  console.log(JSON.stringify({ phase, ok: false, message }));
  process.exit(1);
}

async function refusal(call) {
  try {
    await call();
  } catch (e) {
    return { status: e.status, type: e.constructor.name, code: e.code ?? null, param: e.param ?? null };
  }
  return { status: 200 };
}

function body(i, maxTokens = 8, audio = false) {
  const b = {
    model: "omni-demo", messages: [{ role: "user", content: `Tell me about ${i} ships.` }],
    max_tokens: maxTokens, seed: i,
  };
  if (audio) Object.assign(b, { modalities: ["text", "audio"], audio: { voice: "alloy", format: "wav" } });
  return b;
}

function jsonl(bodies) {
  return bodies.map((b, i) => JSON.stringify({
    custom_id: `q-${i}`, method: "POST", url: "/v1/chat/completions", body: b,
  })).join("\n") + "\n";
}

async function upload(text, name = "requests.jsonl") {
  return owner.files.create({ file: await toFile(Buffer.from(text), name), purpose: "batch" });
}

// Polls the batch until it has one of `statuses`. A 503 (the orchestrator,
// which says whom a token stands for, is being restarted) is polled through.
async function waitFor(id, statuses, seconds) {
  const deadline = Date.now() + seconds * 1000;
  let batch = null;
  for (;;) {
    try {
      batch = await owner.batches.retrieve(id);
      if (statuses.includes(batch.status)) return batch;
    } catch (e) {
      if (e.status !== 503) throw e;
    }
    if (Date.now() > deadline) fail(`batch ${id} still ${batch?.status}: ${JSON.stringify(batch?.request_counts)}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

async function lines(fileId) {
  if (!fileId) return [];
  const text = await (await owner.files.content(fileId)).text();
  return text.split("\n").filter((l) => l).map((l) => JSON.parse(l));
}

// Every custom_id of `expected` exactly once over the files' lines.
function onceEach(expected, all) {
  const seen = new Map();
  for (const line of all) seen.set(line.custom_id, (seen.get(line.custom_id) ?? 0) + 1);
  for (const id of expected) {
    if (seen.get(id) !== 1) fail(`${id} appears ${seen.get(id) ?? 0} times`);
  }
  if (seen.size !== expected.length) fail(`${seen.size} custom_ids in the files, ${expected.length} expected`);
}

if (phase === "run") {
  const bodies = [];
  for (let i = 0; i < 12; i++) bodies.push(body(i, 8, i < 2));
  // A line whose body cannot run (a model this gateway does not serve):
  // it fails alone, into the error file.
  const bad = { ...body(12), model: "no-such-model" };
  const file = await upload(jsonl([...bodies, bad]));
  let batch = await owner.batches.create({
    input_file_id: file.id, endpoint: "/v1/chat/completions", completion_window: "24h",
    metadata: { job: "sdk-test" },
  });
  if (batch.status !== "in_progress" || batch.request_counts.total !== 13 ||
      batch.metadata?.job !== "sdk-test") {
    fail(`create: ${JSON.stringify(batch)}`);
  }
  const refused = {
    retrieve: await refusal(() => other.batches.retrieve(batch.id)),
    cancel: await refusal(() => other.batches.cancel(batch.id)),
  };
  const others = [];
  for await (const b of other.batches.list()) others.push(b.id);
  batch = await waitFor(batch.id, ["completed"], 60);
  if (batch.request_counts.completed !== 12 || batch.request_counts.failed !== 1 ||
      !batch.error_file_id || !batch.completed_at) {
    fail(`completed: ${JSON.stringify(batch)}`);
  }
  const output = await lines(batch.output_file_id);
  onceEach(bodies.map((_, i) => `q-${i}`), output);
  const errors = await lines(batch.error_file_id);
  if (errors.length !== 1 || errors[0].custom_id !== "q-12" || errors[0].response.status_code !== 404 ||
      !errors[0].response.body.error?.message) {
    fail(`error file: ${JSON.stringify(errors)}`);
  }
  // The same answer an interactive call of the same body gets.
  for (const line of output) {
    const i = Number(line.custom_id.slice(2));
    if (line.response.status_code !== 200 || line.error !== null || !line.response.request_id ||
        !line.id.startsWith("batch_req_")) {
      fail(`line ${line.custom_id}: ${JSON.stringify(line).slice(0, 300)}`);
    }
    const interactive = await owner.chat.completions.create(bodies[i]);
    const got = line.response.body.choices[0].message;
    const want = interactive.choices[0].message;
    if (got.content !== want.content) fail(`${line.custom_id}: '${got.content}' vs interactive '${want.content}'`);
    if ((got.audio?.data ?? null) !== (want.audio?.data ?? null)) fail(`${line.custom_id}: its audio differs`);
    if (i < 2 && !(got.audio?.data?.length > 1000)) fail(`${line.custom_id}: no audio`);
  }
  const mine = [];
  for await (const b of owner.batches.list()) mine.push(b.id);
  if (!mine.includes(batch.id)) fail(`list: ${JSON.stringify(mine)}`);
  const refusedFiles = {};
  const dup = jsonl([body(1), body(2)]).replace("q-1", "q-0");
  for (const [name, text] of Object.entries({
    duplicate: dup,
    endpoint: jsonl([body(1)]).replace("/v1/chat/completions", "/v1/embeddings"),
    json: "{not json\n",
  })) {
    const f = await upload(text, `${name}.jsonl`);
    refusedFiles[name] = await refusal(() => owner.batches.create({
      input_file_id: f.id, endpoint: "/v1/chat/completions", completion_window: "24h",
    }));
  }
  refusedFiles.unknown = await refusal(() => owner.batches.create({
    input_file_id: "file-nosuch", endpoint: "/v1/chat/completions", completion_window: "24h",
  }));
  const want = { duplicate: "duplicate_custom_id", endpoint: "mismatched_endpoint", json: "invalid_json_line" };
  for (const [name, code] of Object.entries(want)) {
    const got = refusedFiles[name];
    if (got.status !== 400 || got.code !== code || got.param !== "input_file_id") {
      fail(`${name}: ${JSON.stringify(got)}`);
    }
  }
  if (refusedFiles.unknown.status !== 404) fail(`unknown file: ${JSON.stringify(refusedFiles.unknown)}`);
  for (const what of ["retrieve", "cancel"]) {
    if (refused[what].status !== 404) fail(`another identity's ${what}: ${JSON.stringify(refused[what])}`);
  }
  if (others.length !== 0) fail(`another identity lists ${JSON.stringify(others)}`);
  console.log(JSON.stringify({ phase, ok: true, id: batch.id, counts: batch.request_counts, refused,
    refusedFiles }));
} else if (phase === "cancel") {
  const bodies = [];
  for (let i = 0; i < 200; i++) bodies.push(body(i, 48));
  const file = await upload(jsonl(bodies));
  let batch = await owner.batches.create({
    input_file_id: file.id, endpoint: "/v1/chat/completions", completion_window: "24h",
  });
  const deadline = Date.now() + 60000;
  while ((await owner.batches.retrieve(batch.id)).request_counts.completed < 1) {
    if (Date.now() > deadline) fail("no line completed");
    await new Promise((r) => setTimeout(r, 50));
  }
  batch = await owner.batches.cancel(batch.id);
  if (!["cancelling", "cancelled"].includes(batch.status)) fail(`cancel: ${batch.status}`);
  batch = await waitFor(batch.id, ["cancelled"], 60);
  const output = await lines(batch.output_file_id);
  const errors = await lines(batch.error_file_id);
  onceEach(bodies.map((_, i) => `q-${i}`), [...output, ...errors]);
  if (output.length < 1 || output.length !== batch.request_counts.completed) {
    fail(`${output.length} output lines, counts ${JSON.stringify(batch.request_counts)}`);
  }
  if (errors.length === 0 || errors.some((e) => e.error?.code !== "batch_cancelled")) {
    fail(`errors: ${JSON.stringify(errors.slice(0, 2))}`);
  }
  console.log(JSON.stringify({ phase, ok: true, ran: output.length, cancelled: errors.length }));
} else if (phase === "start") {
  const n = Number(count);
  const bodies = [];
  for (let i = 0; i < n; i++) bodies.push(body(i, 24));
  fs.writeFileSync(path.join(out, "bodies.json"), JSON.stringify(bodies));
  const file = await upload(jsonl(bodies));
  const batch = await owner.batches.create({
    input_file_id: file.id, endpoint: "/v1/chat/completions", completion_window: "24h",
  });
  const deadline = Date.now() + 60000;
  let counts;
  while ((counts = (await owner.batches.retrieve(batch.id)).request_counts).completed < 3) {
    if (Date.now() > deadline) fail("no line completed");
    await new Promise((r) => setTimeout(r, 20));
  }
  if (counts.completed >= n) fail("the batch completed before the kill");
  fs.writeFileSync(path.join(out, "batch_id"), batch.id);
  console.log(JSON.stringify({ phase, ok: true, id: batch.id, counts }));
} else if (phase === "finish") {
  const id = fs.readFileSync(path.join(out, "batch_id"), "utf8");
  const bodies = JSON.parse(fs.readFileSync(path.join(out, "bodies.json"), "utf8"));
  const batch = await waitFor(id, ["completed"], 120);
  const output = await lines(batch.output_file_id);
  onceEach(bodies.map((_, i) => `q-${i}`), output);
  if (batch.request_counts.completed !== bodies.length || batch.error_file_id !== null) {
    fail(`counts ${JSON.stringify(batch.request_counts)}, error file ${batch.error_file_id}`);
  }
  // A line run again after the kill answers as it would have: the same seed.
  for (const line of output.slice(0, 5)) {
    const i = Number(line.custom_id.slice(2));
    const interactive = await owner.chat.completions.create(bodies[i]);
    if (line.response.body.choices[0].message.content !== interactive.choices[0].message.content) {
      fail(`${line.custom_id} differs from an interactive call`);
    }
  }
  console.log(JSON.stringify({ phase, ok: true, id, counts: batch.request_counts }));
} else if (phase === "speech") {
  // Speech lines: each answer's audio (base64 in the output line) is the
  // bytes an interactive audio.speech.create of the same body gets; written
  // to <dir>/speech-<custom_id>.<format> for the decoder.
  const speech = [
    { model: "tts-1", voice: "alloy", input: "The first chapter begins here.", response_format: "wav" },
    { model: "tts-1", voice: "onyx", input: "And the second one after it.", response_format: "mp3" },
  ];
  const text = speech.map((b, i) => JSON.stringify({
    custom_id: `s-${i}`, method: "POST", url: "/v1/audio/speech", body: b,
  })).join("\n") + "\n";
  const file = await upload(text, "speech.jsonl");
  let batch = await owner.batches.create({
    input_file_id: file.id, endpoint: "/v1/audio/speech", completion_window: "1h",
  });
  batch = await waitFor(batch.id, ["completed"], 60);
  const output = await lines(batch.output_file_id);
  onceEach(speech.map((_, i) => `s-${i}`), output);
  for (const line of output) {
    const i = Number(line.custom_id.slice(2));
    const got = line.response.body;
    if (line.response.status_code !== 200 || got.object !== "audio.speech" || !got.audio) {
      fail(`${line.custom_id}: ${JSON.stringify(line).slice(0, 300)}`);
    }
    const audio = Buffer.from(got.audio, "base64");
    const interactive = Buffer.from(await (await owner.audio.speech.create(speech[i])).arrayBuffer());
    if (!audio.equals(interactive)) fail(`${line.custom_id}: ${audio.length} bytes, interactive ${interactive.length}`);
    fs.writeFileSync(path.join(out, `speech-${line.custom_id}.${speech[i].response_format}`), audio);
  }
  console.log(JSON.stringify({ phase, ok: true, id: batch.id, counts: batch.request_counts }));
} else {
  fail(`unknown phase ${phase}`);
}
