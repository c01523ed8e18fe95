// The official OpenAI SDK (npm `openai`, unchanged) asking the omnistage
// gateway for transcripts, as a user of it would. Run by
// gateway/transcription_sdk_test.sh:
//
//   node transcription.mjs <gateway base URL> <dir> <max WER> <sentence>...
//
// <dir> holds s<i>.<ext> for each sentence i (espeak-ng's, encoded as wav,
// flac, ogg (opus) and mp3) and two.wav (sentences 0 and 1, 1.5 s apart).
// Each upload is heard through audio.transcriptions.create (files from the
// SDK's toFile); its word error rate against the sentence is printed, and
// over all must be at most <max WER>. two.wav comes back in every response
// format and streamed; refusals arrive as the SDK's typed errors. Prints a
// line per check, and exits non-zero (after a "FAIL: ..." line) on failure.
import fs from "node:fs";
import path from "node:path";
import OpenAI, { toFile } from "openai";

const [base, dir, maxWerArg, ...sentences] = process.argv.slice(2);
const maxWer = Number(maxWerArg);
const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: "unused", maxRetries: 0, timeout: 30000 });

function fail(message) {
  console.log(`FAIL: ${message}`);
  process.exit(1);
}
function check(ok, message) {
  if (!ok) fail(message);
}
const show = (v) => JSON.stringify(v);

// Lower-cased words, punctuation removed (an apostrophe kept, as in "don't").
const words = (s) => s.toLowerCase().replace(/[^a-z' ]/g, " ").split(/\s+/).filter(Boolean);
// Word-level Levenshtein distance: substitutions, insertions, deletions.
function edits(ref, hyp) {
  let d = Array.from({ length: hyp.length + 1 }, (_, j) => j);
  for (let i = 1; i <= ref.length; i++) {
    const next = [i];
    for (let j = 1; j <= hyp.length; j++) {
      next[j] = Math.min(d[j] + 1, next[j - 1] + 1, d[j - 1] + (ref[i - 1] === hyp[j - 1] ? 0 : 1));
    }
    d = next;
  }
  return d[hyp.length];
}

// An upload read from disk as a stream, or (readWhole) from a Buffer.
const upload = (name, readWhole = false) =>
  toFile(readWhole ? fs.readFileSync(path.join(dir, name)) : fs.createReadStream(path.join(dir, name)), name);

// Every upload format: each sentence heard, its word error rate.
let totalEdits = 0;
let totalWords = 0;
for (const [k, ext] of ["wav", "flac", "ogg", "mp3"].entries()) {
  let formatEdits = 0;
  let formatWords = 0;
  for (const [i, sentence] of sentences.entries()) {
    const heard = await client.audio.transcriptions.create({
      file: await upload(`s${i}.${ext}`, k % 2 === 1), model: "whisper-1",
    });
    check(typeof heard.text === "string", `${ext} s${i}: no text: ${show(heard)}`);
    check(heard.usage?.type === "duration" && heard.usage.seconds >= 1, `${ext} s${i}: usage ${show(heard)}`);
    const ref = words(sentence);
    const e = edits(ref, words(heard.text));
    console.log(`${ext} s${i}: ${e}/${ref.length} = ${(e / ref.length).toFixed(2)}\t${heard.text.trim()}`);
    formatEdits += e;
    formatWords += ref.length;
  }
  console.log(`word error rate, ${ext}: ${formatEdits}/${formatWords} = ${(formatEdits / formatWords).toFixed(2)}`);
  totalEdits += formatEdits;
  totalWords += formatWords;
}
const wer = totalEdits / totalWords;
console.log(`word error rate, all: ${totalEdits}/${totalWords} = ${wer.toFixed(2)} (bound ${maxWer})`);
check(wer <= maxWer, `the word error rate ${wer.toFixed(2)} is over the bound ${maxWer}`);

// Every response format, of the two-sentence upload.
const two = (more) => upload("two.wav").then((file) =>
  client.audio.transcriptions.create({ file, model: "whisper-1", ...more }));
const json = await two({ response_format: "json" });
check(typeof json === "object" && typeof json.text === "string" && json.text.length > 0, `json: ${show(json)}`);
const text = json.text.trim();
check(words(text).length >= 8, `json: too few words: ${show(json)}`);
console.log(`json: ${show(json.text)}`);

const plain = await two({ response_format: "text" });
check(typeof plain === "string" && plain.trim() === text, `text: ${show(plain)}, json's ${show(text)}`);
console.log(`text: ${show(plain)}`);

const verbose = await two({
  response_format: "verbose_json", timestamp_granularities: ["word", "segment"], language: "en",
});
check(verbose.task === "transcribe" && verbose.language === "english", `verbose_json: ${show(verbose)}`);
check(verbose.text.trim() === text, `verbose_json: text ${show(verbose.text)}, json's ${show(text)}`);
const { segments, duration } = verbose;
check(Array.isArray(segments) && segments.length === 2, `verbose_json: segments ${show(segments)}`);
// In seconds: speak_pcm leaves 0.3 s of silence before the first sentence,
// and the 1.5 s gap lies between the two.
check(segments.every((s) => 0 <= s.start && s.start < s.end && s.end <= duration + 1e-9),
  `verbose_json: segments not within 0..${duration} s: ${show(segments)}`);
check(0.2 < segments[0].start && segments[0].start < 0.6, `verbose_json: first segment ${show(segments[0])}`);
check(segments[1].start - segments[0].end > 1.5, `verbose_json: no gap between ${show(segments)}`);
check(segments.map((s) => s.text.trim()).join(" ") === text, `verbose_json: segments' text ${show(segments)}`);
const vwords = verbose.words;
check(Array.isArray(vwords) && vwords.length >= 8 && vwords.every((w) => w.start < w.end),
  `verbose_json: words ${show(vwords)}`);
check(vwords.every((w, i) => i === 0 || vwords[i - 1].end <= w.start + 1e-9), `verbose_json: words overlap ${show(vwords)}`);
check(vwords.map((w) => w.word).join(" ") === verbose.text.trim(), `verbose_json: words ${show(vwords)}`);
console.log(`verbose_json: ${duration} s, segments ${show(segments.map((s) => [s.start, s.end, s.text]))}, ${vwords.length} words`);

const srt = await two({ response_format: "srt" });
check(typeof srt === "string" && /^1\n\d\d:\d\d:\d\d,\d\d\d --> \d\d:\d\d:\d\d,\d\d\d\n/.test(srt) &&
  srt.includes("\n\n2\n"), `srt: ${show(srt)}`);
console.log(`srt: ${show(srt)}`);
const vtt = await two({ response_format: "vtt" });
check(typeof vtt === "string" && /^WEBVTT\n\n\d\d:\d\d:\d\d\.\d\d\d --> \d\d:\d\d:\d\d\.\d\d\d\n/.test(vtt),
  `vtt: ${show(vtt)}`);
console.log(`vtt: ${show(vtt)}`);

// Streamed: transcript.text.delta events, then one transcript.text.done
// holding the deltas joined.
const stream = await two({ stream: true });
const events = [];
for await (const event of stream) events.push(event);
const types = events.map((e) => e.type);
check(types.length >= 2 && types.at(-1) === "transcript.text.done" &&
  types.slice(0, -1).every((t) => t === "transcript.text.delta"), `stream: events ${show(types)}`);
const deltas = events.slice(0, -1).map((e) => e.delta).join("");
check(deltas === events.at(-1).text, `stream: deltas ${show(deltas)}, done ${show(events.at(-1))}`);
check(deltas.trim() === text, `stream: ${show(deltas)}, json's ${show(text)}`);
console.log(`stream: ${show(types)}`);

// Refusals, as the SDK's typed errors.
async function refused(name, body, want) {
  try {
    await client.audio.transcriptions.create(body);
  } catch (e) {
    check(e instanceof want.type && e.status === want.status && (!want.param || e.param === want.param),
      `${name}: ${e.constructor.name} ${e.status} param ${e.param}: ${e.message}; expected ${want.type.name} ` +
      `${want.status} param ${want.param}`);
    console.log(`${name}: ${e.constructor.name} ${e.status} param ${e.param}: ${e.message}`);
    return;
  }
  fail(`${name}: accepted`);
}
await refused("unknown model", { file: await upload("two.wav"), model: "tts-1" },
  { type: OpenAI.NotFoundError, status: 404, param: "model" });
await refused("not audio", { file: await toFile(Buffer.from("not audio at all\n"), "notes.txt"), model: "whisper-1" },
  { type: OpenAI.BadRequestError, status: 400, param: "file" });
await refused("over 25 MiB", { file: await toFile(Buffer.alloc(25 * 1024 * 1024 + 1), "big.wav"), model: "whisper-1" },
  { type: OpenAI.APIError, status: 413, param: "file" });
console.log("ok");
