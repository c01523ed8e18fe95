// The official OpenAI SDK's Realtime client (npm `openai`, unchanged:
// OpenAIRealtimeWS over npm `ws`) against the omnistage gateway's
// /v1/realtime. Run by gateway/realtime_sdk_test.sh:
//
//   node realtime_test.mjs <gateway base URL> <output dir> <check>
//
// The SDK always dials wss:// (TLS): the base is the gateway's HTTPS URL and
// NODE_EXTRA_CA_CERTS names its CA. Checks (each prints one JSON line, exits
// non-zero on failure):
//   text        a text response streams output_text deltas; writes text.txt
//   audio       an audio response: output_audio deltas (PCM) and transcript
//               deltas; writes audio.txt and audio.pcm
//   cancel      response.cancel mid-way: response.done status "cancelled"
//   errors      malformed events get Realtime-shaped errors; the session goes
//               on and answers a response after them
//   concurrent  200 sessions at once, each gets its whole response
//   unauthorized a token the orchestrator does not know: the socket is refused
//               with 401
//   plain       (base http://) the same text response over ws:// with `ws`
// Against a pipeline whose stage 0 listens (local_voice_agent.yaml), with
// SPEECH_DIR holding N.pcm (24 kHz PCM16 mono) and N.txt, the sentence spoken:
//   voice       each sentence appended in 100 ms pieces, committed, answered:
//               the transcript (input_audio_transcription) and its word error
//               rate against the sentence, the answer as text and audio
//   voice_cancel a spoken turn's response cancelled at its first audio
//   voice_errors malformed audio events get errors; a spoken turn then works
//   voice_vad   server VAD (the default): sentences streamed at real-time
//               pace between silences, never committed, are heard, committed
//               and answered by themselves (realtime_turns.mjs)
//   voice_barge_in the user speaks over an answer: it is cancelled and its
//               audio truncated, and the new turn answered
// The session and its helpers are realtime_client.mjs's; the malformed
// events' checks (errors, voice_errors) realtime_malformed.mjs's.
import fs from "node:fs";
import path from "node:path";
import WebSocket from "ws";
import { appendAndCommit, apiKey, base, check, fail, manualTurns, model, out, prompt, respond, say,
         Session, speak, speech, speechDir } from "./realtime_client.mjs";
import { voice_barge_in, voice_vad } from "./realtime_turns.mjs";
import { errors, voice_errors } from "./realtime_malformed.mjs";

async function text() {
  const session = new Session();
  const created = await session.next("session.created");
  if (created.session.type !== "realtime" || !created.session.id) fail("session.created");
  const { done, from } = await respond(session, "text", prompt, 24);
  const deltas = session.of("response.output_text.delta", from).map((e) => e.delta).join("");
  const final = session.of("response.output_text.done", from)[0]?.text;
  if (done.status !== "completed" && done.status !== "incomplete") fail(`status ${done.status}`);
  if (!deltas || deltas !== final) fail(`deltas '${deltas}' vs done '${final}'`);
  if (done.output[0]?.content[0]?.text !== final) fail("response.done's item lacks the text");
  if (!(done.usage?.output_tokens > 0)) fail(`no usage: ${JSON.stringify(done.usage)}`);
  const order = session.events.slice(from).map((e) => e.type);
  for (const type of ["response.created", "response.output_item.added",
                      "response.content_part.added", "response.output_text.delta",
                      "response.output_text.done", "response.content_part.done",
                      "response.output_item.done", "response.done"]) {
    if (!order.includes(type)) fail(`no ${type} in ${order.join(",")}`);
  }
  if (session.events.some((e) => !e.event_id)) fail("an event without event_id");
  fs.writeFileSync(path.join(out, "text.txt"), deltas);
  session.close();
  return { status: done.status, chars: deltas.length, events: order.length };
}

async function audio() {
  const session = new Session();
  await session.next("session.created");
  const { done, from } = await respond(session, "audio", prompt, 24);
  const transcript = session.of("response.output_audio_transcript.delta", from)
    .map((e) => e.delta).join("");
  const pcm = Buffer.concat(session.of("response.output_audio.delta", from)
    .map((e) => Buffer.from(e.delta, "base64")));
  const final = session.of("response.output_audio_transcript.done", from)[0]?.transcript;
  if (done.status !== "completed" && done.status !== "incomplete") fail(`status ${done.status}`);
  if (!transcript || transcript !== final) fail(`transcript '${transcript}' vs '${final}'`);
  if (pcm.length === 0) fail("no audio");
  if (session.of("response.output_audio.done", from).length !== 1) fail("no output_audio.done");
  if (session.of("response.output_text.delta", from).length) fail("text deltas in audio mode");
  fs.writeFileSync(path.join(out, "audio.txt"), transcript);
  fs.writeFileSync(path.join(out, "audio.pcm"), pcm);
  session.close();
  return { status: done.status, chars: transcript.length, audio_bytes: pcm.length };
}

async function cancel() {
  const session = new Session();
  await session.next("session.created");
  session.send({ type: "session.update",
                 session: { type: "realtime", output_modalities: ["audio"] } });
  session.send(say("Tell me everything about the sea, at length."));
  session.send({ type: "response.create" });
  const created = await session.next("response.created");
  await session.next("response.output_audio_transcript.delta");
  session.send({ type: "response.cancel", response_id: created.response.id });
  const done = await session.next("response.done");
  if (done.response.status !== "cancelled") fail(`status ${done.response.status}`);
  if (done.response.status_details?.reason !== "client_cancelled") fail("no client_cancelled");
  // The session goes on: another cancel has nothing to cancel.
  const mark = session.events.length;
  session.send({ type: "response.cancel", event_id: "evt_again" });
  const error = await session.next("error", mark);
  if (error.error.code !== "response_cancel_not_active" || error.error.event_id !== "evt_again") {
    fail(`second cancel: ${JSON.stringify(error)}`);
  }
  session.close();
  return { status: done.response.status, said: done.response.output[0]?.content[0]?.transcript };
}

async function concurrent() {
  const sessions = 200;
  const one = async (i) => {
    const session = new Session();
    await session.next("session.created");
    const { done, from } = await respond(session, "text", `Session ${i}`, 8);
    const deltas = session.of("response.output_text.delta", from).map((e) => e.delta).join("");
    session.close();
    return (done.status === "completed" || done.status === "incomplete") && deltas.length > 0 &&
      deltas === done.output[0]?.content[0]?.text;
  };
  const results = await Promise.allSettled(Array.from({ length: sessions }, (_, i) => one(i)));
  const complete = results.filter((r) => r.status === "fulfilled" && r.value).length;
  if (complete !== sessions) {
    const why = results.find((r) => r.status === "rejected")?.reason?.message;
    fail(`${sessions - complete} of ${sessions} sessions incomplete (${why})`);
  }
  return { sessions, complete };
}

async function unauthorized() {
  const session = new Session("not-a-token-of-ours");
  try {
    await session.next("session.created");
  } catch (e) {
    if (!/401/.test(e.message)) fail(`refused, but not with 401: ${e.message}`);
    return { refused: 401 };
  }
  fail("a session opened with an unknown token");
}

// ws:// without the SDK (which always dials wss://): the plain HTTP gateway.
async function plain() {
  const url = `${base.replace(/^http/, "ws")}/v1/realtime?model=${model}`;
  const socket = new WebSocket(url, { headers: { Authorization: `Bearer ${apiKey}` } });
  const events = [];
  const waiters = [];
  socket.on("message", (data) => {
    events.push(JSON.parse(data.toString()));
    for (const waiter of [...waiters]) waiter();
  });
  const next = (type) => new Promise((resolve, reject) => {
    const look = () => {
      const found = events.find((e) => e.type === type);
      if (!found) return;
      waiters.splice(waiters.indexOf(look), 1);
      resolve(found);
    };
    waiters.push(look);
    socket.once("error", reject);
    look();
  });
  await next("session.created");
  const send = (event) => socket.send(JSON.stringify(event));
  send({ type: "session.update", session: { type: "realtime", output_modalities: ["text"],
                                           max_output_tokens: 24 } });
  send(say(prompt));
  send({ type: "response.create" });
  const done = await next("response.done");
  const deltas = events.filter((e) => e.type === "response.output_text.delta")
    .map((e) => e.delta).join("");
  if (!deltas) fail("no text over ws://");
  fs.writeFileSync(path.join(out, "plain.txt"), deltas);
  socket.close();
  return { status: done.response.status, chars: deltas.length };
}

// Words, lower case, without punctuation.
function words(text) {
  return text.toLowerCase().replace(/[^a-z0-9' ]+/g, " ").split(/\s+/).filter(Boolean);
}

// Word-level edit distance (substitutions, insertions, deletions).
function wordErrors(reference, heard) {
  const r = words(reference), h = words(heard);
  let row = Array.from({ length: h.length + 1 }, (_, j) => j);
  for (let i = 1; i <= r.length; i++) {
    const next = [i];
    for (let j = 1; j <= h.length; j++) {
      next[j] = Math.min(row[j] + 1, next[j - 1] + 1, row[j - 1] + (r[i - 1] === h[j - 1] ? 0 : 1));
    }
    row = next;
  }
  return { errors: row[h.length], words: r.length };
}

async function voice() {
  const session = new Session();
  await session.next("session.created");
  session.send({ type: "session.update",
                 session: { type: "realtime", output_modalities: ["audio"],
                            audio: { input: { turn_detection: null } } } });
  await session.next("session.updated");
  let errors = 0, total = 0;
  const turns = [];
  for (let i = 0; fs.existsSync(path.join(speechDir, `${i}.pcm`)); i++) {
    const { pcm, text } = speech(i);
    const turn = await speak(session, pcm);
    if (turn.done.status !== "completed") fail(`turn ${i}: ${JSON.stringify(turn.done.status_details)}`);
    if (!turn.heard?.transcript) fail(`turn ${i}: nothing heard`);
    const deltas = session.of("conversation.item.input_audio_transcription.delta", turn.from)
      .map((e) => e.delta).join("");
    if (deltas !== turn.heard.transcript) fail(`transcript deltas '${deltas}' vs '${turn.heard.transcript}'`);
    const answer = session.of("response.output_audio_transcript.delta", turn.from)
      .map((e) => e.delta).join("");
    const audio = session.of("response.output_audio.delta", turn.from)
      .reduce((n, e) => n + Buffer.from(e.delta, "base64").length, 0);
    if (!answer || audio === 0) fail(`turn ${i}: answer '${answer}', ${audio} audio bytes`);
    const wer = wordErrors(text, turn.heard.transcript);
    errors += wer.errors;
    total += wer.words;
    turns.push({ said: text, heard: turn.heard.transcript, answer: answer.slice(0, 60),
                 audio_bytes: audio, ms: turn.ms });
  }
  if (turns.length === 0) fail(`no speech in ${speechDir}`);
  // The user's items hold what was heard: the next text turn sees it.
  const item = session.of("conversation.item.added").find((e) => e.item.content[0].type === "input_audio");
  if (!item || item.item.role !== "user") fail("no user input_audio item");
  session.close();
  return { wer: Number((errors / total).toFixed(3)), errors, words: total, turns };
}

async function voice_cancel() {
  const session = new Session();
  await session.next("session.created");
  await manualTurns(session);
  const { pcm } = speech(0);
  appendAndCommit(session, pcm);
  await session.next("input_audio_buffer.committed");
  session.send({ type: "response.create" });
  const created = await session.next("response.created");
  await session.next("response.output_audio.delta");
  session.send({ type: "response.cancel", response_id: created.response.id });
  const done = await session.next("response.done");
  if (done.response.status !== "cancelled") fail(`status ${done.response.status}`);
  // A turn left open by a clear is cancelled too.
  session.send({ type: "input_audio_buffer.append", audio: pcm.subarray(0, 4800).toString("base64") });
  const mark = session.events.length;
  session.send({ type: "input_audio_buffer.clear" });
  await session.next("input_audio_buffer.cleared", mark);
  session.close();
  return { status: done.response.status };
}

const checks = { text, audio, cancel, errors, concurrent, unauthorized, plain, voice, voice_cancel,
                 voice_errors, voice_vad, voice_barge_in };
if (!checks[check]) fail(`unknown check '${check}'`);
try {
  const result = await checks[check]();
  console.log(JSON.stringify({ check, ok: true, ...result }));
  process.exit(0);
} catch (e) {
  fail(`${e.constructor.name}: ${e.message}`);
}
