// The Realtime checks of malformed events (realtime_test.mjs runs them):
// each is answered with its Realtime-shaped error, and the session goes on.
//   errors        events of every kind (realtime_sdk_test.sh)
//   voice_errors  input audio events (realtime_voice_test.sh)
import { fail, manualTurns, prompt, respond, Session, speak, speech } from "./realtime_client.mjs";

// Sends each case's event (a string goes as it is) and waits for its error:
// an invalid_request_error with the case's code, its param (when not null),
// a message and the event's event_id. Returns the codes seen.
async function answersEach(session, cases) {
  const seen = [];
  for (const [event, param, code] of cases) {
    const mark = session.events.length;
    if (typeof event === "string") session.rt.socket.send(event);
    else session.send(event);
    const error = (await session.next("error", mark)).error;
    if (error.type !== "invalid_request_error" || error.code !== code ||
        (param !== null && error.param !== param) || !error.message ||
        (event.event_id && error.event_id !== event.event_id)) {
      fail(`${JSON.stringify(event)}: ${JSON.stringify(error)}`);
    }
    seen.push(code);
  }
  return seen;
}

export async function errors() {
  const session = new Session();
  await session.next("session.created");
  const seen = await answersEach(session, [
    ["not json", null, "invalid_json"],
    [{ type: "no.such.event", event_id: "e1" }, "type", "invalid_value"],
    [{ event_id: "e2" }, "type", "missing_required_parameter"],
    [{ type: "conversation.item.create", event_id: "e3" }, "item", "missing_required_parameter"],
    [{ type: "conversation.item.create", event_id: "e4",
       item: { type: "message", role: "user", content: [{ type: "input_text", text: 7 }] } },
     "item.content[0].text", "invalid_type"],
    [{ type: "session.update", event_id: "e5", session: { type: "realtime",
       audio: { output: { format: { type: "audio/pcmu" } } } } },
     "session.audio.output.format.type", "unsupported_value"],
    [{ type: "session.update", event_id: "e6", session: { type: "realtime",
       audio: { input: { turn_detection: { type: "semantic_vad" } } } } },
     "session.audio.input.turn_detection.type", "unsupported_value"],
    [{ type: "session.update", event_id: "e6b", session: { type: "realtime",
       audio: { input: { turn_detection: { type: "server_vad", threshold: 2 } } } } },
     "session.audio.input.turn_detection.threshold", "invalid_value"],
    [{ type: "conversation.item.truncate", event_id: "e6c", item_id: "nope", content_index: 0,
       audio_end_ms: 0 }, "item_id", "item_not_found"],
    [{ type: "conversation.item.truncate", event_id: "e6d", item_id: "nope" }, "content_index",
     "missing_required_parameter"],
    [{ type: "response.cancel", event_id: "e7" }, null, "response_cancel_not_active"],
    [{ type: "response.create", event_id: "e8" }, null, "empty_conversation"],
  ]);
  // Audio to a pipeline that does not hear: committed by hand.
  await manualTurns(session);
  seen.push(...await answersEach(session, [
    [{ type: "input_audio_buffer.append", event_id: "e9", audio: "AAAAAA==" }, null,
     "input_audio_not_supported"],
    [{ type: "input_audio_buffer.commit", event_id: "e10" }, null, "input_audio_not_supported"],
  ]));
  // After all that, the session answers.
  const { done } = await respond(session, "text", prompt, 8);
  if (done.status !== "completed" && done.status !== "incomplete") fail(`then ${done.status}`);
  session.close();
  return { errors: seen.length, then: done.status };
}

export async function voice_errors() {
  const session = new Session();
  await session.next("session.created");
  await manualTurns(session);
  // 2 bytes: a whole sample, taken without an answer.
  session.send({ type: "input_audio_buffer.append", event_id: "v1", audio: "AAE=" });
  const seen = await answersEach(session, [
    [{ type: "input_audio_buffer.append", event_id: "v2", audio: "AAEC" /* 3 bytes */ }, null,
     "invalid_value"],
    [{ type: "input_audio_buffer.append", event_id: "v3", audio: "!!" }, null, "invalid_value"],
    [{ type: "input_audio_buffer.append", event_id: "v4" }, null, "missing_required_parameter"],
    [{ type: "input_audio_buffer.append", event_id: "v5", audio: 7 }, null, "invalid_type"],
    [{ type: "session.update", event_id: "v6", session: { type: "realtime",
       audio: { input: { format: { type: "audio/pcm", rate: 16000 } } } } }, null,
     "invalid_value"],
  ]);
  // Cleared, the buffer has nothing to commit.
  const mark = session.events.length;
  session.send({ type: "input_audio_buffer.clear", event_id: "v7" });
  await session.next("input_audio_buffer.cleared", mark);
  seen.push(...await answersEach(session, [
    [{ type: "input_audio_buffer.commit", event_id: "v8" }, null,
     "input_audio_buffer_commit_empty"],
  ]));
  // The session goes on: a spoken turn is heard and answered.
  const turn = await speak(session, speech(0).pcm);
  if (turn.done.status !== "completed" || !turn.heard) fail(`then ${turn.done.status}`);
  session.close();
  return { errors: seen.length, then: turn.done.status, heard: turn.heard.transcript };
}
