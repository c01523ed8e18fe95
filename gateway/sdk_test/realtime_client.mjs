// The official OpenAI SDK's Realtime client as the Realtime checks use it
// (realtime_test.mjs, realtime_malformed.mjs): the command line, a session
// that keeps every server event, and what a check does in one — a message
// said, a response, a spoken turn.
import fs from "node:fs";
import path from "node:path";
import OpenAI from "openai";
import { OpenAIRealtimeWS } from "openai/realtime/ws";

export const [base, out, check] = process.argv.slice(2);
export const apiKey = process.env.OMNISTAGE_TOKEN || "unused-without-tokens";
export const model = process.env.OMNISTAGE_MODEL || "omni-demo";
export const prompt = "Tell me about the sea.";

export function fail(message) {
  console.log(JSON.stringify({ check, ok: false, message }));
  process.exit(1);
}

// A session: every server event kept, in order; next(type) waits for one.
export class Session {
  constructor(key = apiKey) {
    const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: key });
    this.rt = new OpenAIRealtimeWS({ model }, client);
    this.events = [];
    this.waiters = [];
    this.errors = [];
    this.rt.on("event", (event) => this.take(event));
    // Error events arrive here too (and through "event", where they are
    // looked at); what has no event is the connection's own failure.
    this.rt.on("error", (error) => {
      if (error.error) return;
      this.errors.push(error);
      this.take(null);
    });
  }
  take(event) {
    if (event) {
      event.receivedAt = Date.now();  // when it came (ms)
      this.events.push(event);
    }
    for (const waiter of [...this.waiters]) waiter();
  }
  // The first event of `type` after index `from` (and that `is`, if given; or
  // an SDK error), within 60 s.
  next(type, from = 0, is = () => true) {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no ${type} within 60 s`)), 60000);
      const look = () => {
        const found = this.events.slice(from).find((e) => e.type === type && is(e));
        if (found || (this.errors.length && type !== "error")) {
          clearTimeout(timer);
          this.waiters = this.waiters.filter((w) => w !== look);
          if (found) resolve(found);
          else reject(this.errors[0]);
        }
      };
      this.waiters.push(look);
      look();
    });
  }
  send(event) { this.rt.send(event); }
  close() { this.rt.close(); }
  // The events of the response `done` ended, from index `from`.
  of(type, from = 0) { return this.events.slice(from).filter((e) => e.type === type); }
}

export function say(text) {
  return { type: "conversation.item.create",
           item: { type: "message", role: "user", content: [{ type: "input_text", text }] } };
}

// One response in a session set to `modality`; returns the response.done and
// the index its events start from.
export async function respond(session, modality, text, max_output_tokens) {
  const from = session.events.length;
  session.send({ type: "session.update",
                 session: { type: "realtime", output_modalities: [modality], max_output_tokens,
                            audio: { output: { voice: "alloy" } } } });
  await session.next("session.updated", from);
  session.send(say(text));
  await session.next("conversation.item.done", from);
  session.send({ type: "response.create" });
  const done = await session.next("response.done", from);
  return { done: done.response, from };
}

// Turn detection off: the client commits its turns and asks for responses.
export async function manualTurns(session) {
  const from = session.events.length;
  session.send({ type: "session.update",
                 session: { type: "realtime", audio: { input: { turn_detection: null } } } });
  const updated = await session.next("session.updated", from);
  if (updated.session.audio.input.turn_detection !== null) fail("turn_detection stayed on");
}

export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// `pcm` appended in 100 ms pieces at real-time pace (a microphone's), each
// piece's send time recorded in `sent` (ms since `t0`) if given.
export async function stream(session, pcm, t0 = Date.now(), sent = null) {
  const began = Date.now();
  for (let at = 0, n = 0; at < pcm.length; at += 4800, n++) {
    session.send({ type: "input_audio_buffer.append",
                   audio: pcm.subarray(at, at + 4800).toString("base64") });
    if (sent) sent.push(Date.now() - t0);
    const due = began + (n + 1) * 100;
    await sleep(Math.max(0, due - Date.now()));
  }
}

// `ms` of silence as 24 kHz PCM16.
export const silence = (ms) => Buffer.alloc(ms * 48);

// Where the speech in `pcm` is: its first and last sample above |500| (ms).
export function speechSpan(pcm) {
  let first = -1, last = -1;
  for (let i = 0; i + 1 < pcm.length; i += 2) {
    if (Math.abs(pcm.readInt16LE(i)) > 500) {
      if (first < 0) first = i;
      last = i;
    }
  }
  return { start: first / 48, end: last / 48 };
}

export const speechDir = process.env.SPEECH_DIR;
export function speech(i) {
  return { pcm: fs.readFileSync(path.join(speechDir, `${i}.pcm`)),
           text: fs.readFileSync(path.join(speechDir, `${i}.txt`), "utf8").trim() };
}

// `pcm` appended in 100 ms pieces (4,800 bytes of 24 kHz 16-bit mono), then
// committed.
export function appendAndCommit(session, pcm) {
  for (let at = 0; at < pcm.length; at += 4800) {
    session.send({ type: "input_audio_buffer.append",
                   audio: pcm.subarray(at, at + 4800).toString("base64") });
  }
  session.send({ type: "input_audio_buffer.commit" });
}

// One spoken turn: appended, committed, answered.
export async function speak(session, pcm) {
  const from = session.events.length;
  const started = Date.now();
  appendAndCommit(session, pcm);
  const committed = await session.next("input_audio_buffer.committed", from);
  session.send({ type: "response.create" });
  const done = (await session.next("response.done", from)).response;
  const heard = session.of("conversation.item.input_audio_transcription.completed", from)
    .find((e) => e.item_id === committed.item_id);
  const firstAudio = session.events.slice(from)
    .findIndex((e) => e.type === "response.output_audio.delta");
  return { done, from, committed, heard, ms: Date.now() - started, firstAudio };
}
