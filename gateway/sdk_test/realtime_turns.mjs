// The Realtime checks of server VAD (realtime_test.mjs runs them, against a
// pipeline whose stage 0 listens; realtime_voice_test.sh): the session keeps
// its default turn_detection, and the client only streams its microphone —
// sentences between silences, 100 ms a piece at real-time pace — never
// committing and never asking for a response.
//   voice_vad      each sentence is heard where it is (speech_started and
//                  speech_stopped within tolerance of the truth), committed
//                  and answered by itself
//   voice_barge_in the user speaks over an answer: it is cancelled
//                  (turn_detected), its audio truncated to what can have been
//                  played, and the new turn answered
import { fail, Session, silence, speech, speechSpan, stream } from "./realtime_client.mjs";

// How far a detected start (less its 300 ms padding) or end may lie from the
// truth (voice_activity.h's measured error, and a 10 ms frame).
const kToleranceMs = 200;

async function vadSession() {
  const session = new Session();
  const created = await session.next("session.created");
  const vad = created.session.audio.input.turn_detection;
  if (vad?.type !== "server_vad" || vad.create_response !== true ||
      vad.interrupt_response !== true || vad.silence_duration_ms !== 500) {
    fail(`the default turn_detection: ${JSON.stringify(vad)}`);
  }
  return session;
}

// Checks one detected turn's events from `from`: started (`padding` ms early)
// and stopped at the speech that lies at `span` (ms of the session's audio),
// the item committed and answered. Returns the response.done and the
// transcript.
async function detectedTurn(session, from, span, padding = 300) {
  const started = await session.next("input_audio_buffer.speech_started", from);
  const stopped = await session.next("input_audio_buffer.speech_stopped", from);
  const committed = await session.next("input_audio_buffer.committed", from);
  if (stopped.item_id !== started.item_id || committed.item_id !== started.item_id) {
    fail(`item ids: ${started.item_id} ${stopped.item_id} ${committed.item_id}`);
  }
  if (Math.abs(started.audio_start_ms + padding - span.start) > kToleranceMs ||
      Math.abs(stopped.audio_end_ms - span.end) > kToleranceMs) {
    fail(`heard ${started.audio_start_ms}+${padding}..${stopped.audio_end_ms}, spoken ` +
         `${span.start.toFixed(0)}..${span.end.toFixed(0)}`);
  }
  const created = await session.next("response.created", from);
  const done = (await session.next("response.done", from)).response;
  if (done.id !== created.response.id) fail("another response");
  const heard = session.of("conversation.item.input_audio_transcription.completed", from)
    .find((e) => e.item_id === committed.item_id);
  return { done, heard: heard?.transcript ?? "", started, stopped };
}

export async function voice_vad() {
  const session = await vadSession();
  const turns = [];
  let at = 0;  // ms of audio sent
  for (let i = 0; i < 2; i++) {
    const { pcm, text } = speech(i);
    // The second turn with settings of its own: less padding, a longer silence.
    const padding = i === 0 ? 300 : 100;
    if (i === 1) {
      const mark = session.events.length;
      session.send({ type: "session.update", session: { type: "realtime", audio: { input: {
        turn_detection: { type: "server_vad", prefix_padding_ms: 100,
                          silence_duration_ms: 1000 } } } } });
      const vad = (await session.next("session.updated", mark)).session.audio.input.turn_detection;
      if (vad.prefix_padding_ms !== 100 || vad.silence_duration_ms !== 1000 ||
          vad.threshold !== 0.5 || vad.create_response !== true) {
        fail(`session.updated: ${JSON.stringify(vad)}`);
      }
    }
    const from = session.events.length;
    const said = Buffer.concat([silence(1000), pcm, silence(1500)]);
    const span = speechSpan(said);
    const sent = [];
    const t0 = Date.now();
    await stream(session, said, t0, sent);
    const turn = await detectedTurn(session, from,
                                    { start: at + span.start, end: at + span.end }, padding);
    // The stop came once the silence had lasted silence_duration_ms: not
    // before the audio holding that much silence was sent.
    const silenceMs = i === 0 ? 500 : 1000;
    const neededPiece = Math.ceil((span.end + silenceMs) / 100) - 1;
    if (turn.stopped.receivedAt - t0 < sent[neededPiece]) {
      fail(`turn ${i}: stopped before ${silenceMs} ms of silence were sent`);
    }
    at += said.length / 48;
    if (turn.done.status !== "completed") fail(`turn ${i}: ${turn.done.status}`);
    if (!turn.heard) fail(`turn ${i}: nothing heard`);
    const audio = session.of("response.output_audio.delta", from).length;
    if (audio === 0) fail(`turn ${i}: no audio in the answer`);
    turns.push({ said: text, heard: turn.heard, start_ms: turn.started.audio_start_ms,
                 end_ms: turn.stopped.audio_end_ms,
                 spoken_ms: [Math.round(at - said.length / 48 + span.start),
                             Math.round(at - said.length / 48 + span.end)] });
  }
  if (session.of("error").length) fail(`errors: ${JSON.stringify(session.of("error"))}`);
  session.close();
  return { turns };
}

export async function voice_barge_in() {
  const session = await vadSession();
  const first = speech(0).pcm;
  // The second sentence from its first sound: heard as soon as it can be.
  const second = speech(1).pcm.subarray(Math.floor(speechSpan(speech(1).pcm).start) * 48);
  await stream(session, Buffer.concat([silence(500), first, silence(700)]));
  const created = await session.next("response.created");
  const itemAdded = await session.next("response.output_item.added");
  await session.next("response.output_audio.delta");
  // Speaking over the answer as its audio plays.
  const from = session.events.length;
  const overAt = Date.now();
  const streaming = stream(session, Buffer.concat([second, silence(1500)]));
  const done = (await session.next("response.done", from)).response;
  if (done.id !== created.response.id) fail("response.done of another response");
  if (done.status !== "cancelled" || done.status_details?.reason !== "turn_detected") {
    fail(`the answer spoken over: ${done.status} ${JSON.stringify(done.status_details)}`);
  }
  const started = session.of("input_audio_buffer.speech_started", from)[0];
  if (!started) fail("no speech_started before the cancel");
  const truncated = await session.next("conversation.item.truncated", from);
  const sentMs = session.of("response.output_audio.delta")
    .filter((e) => e.response_id === created.response.id)
    .reduce((n, e) => n + Buffer.from(e.delta, "base64").length, 0) / 48;
  const playedMs = Date.now() - overAt + 1000;  // an upper bound on what could play
  if (truncated.item_id !== itemAdded.item.id || truncated.content_index !== 0 ||
      truncated.audio_end_ms < 0 || truncated.audio_end_ms > Math.min(sentMs, playedMs)) {
    fail(`truncated ${JSON.stringify(truncated)}: ${sentMs} ms sent`);
  }
  await streaming;
  // The turn spoken over the answer is committed and answered in full.
  const next = await session.next("input_audio_buffer.committed", from);
  const other = (e) => e.response.id !== created.response.id;
  const nextDone = (await session.next("response.done", from, other)).response;
  if (nextDone.status !== "completed") fail(`the next turn's answer: ${nextDone.status}`);
  if (started.item_id !== next.item_id) fail("the committed turn is not the one heard");
  session.close();
  return { cancelled: done.status_details.reason, truncated_ms: truncated.audio_end_ms,
           sent_ms: Math.round(sentMs), next: nextDone.status };
}
