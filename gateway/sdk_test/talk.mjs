// Speaks to the omnistage gateway's Realtime API as a voice app does: a
// microphone's stream at real-time pace, with the session's default server VAD
// finding the turn, committing and answering it — no commit, no
// response.create. Over ws:// (a plain-HTTP gateway) with npm `ws`.
//
//   node gateway/sdk_test/talk.mjs [--base=http://127.0.0.1:8000] [--wav=answer.wav] question.pcm
//
// question.pcm: 16-bit little-endian mono PCM at 24 kHz (the speech route's
// response_format pcm). It is sent after 500 ms of silence and followed by
// 1.5 s more, in 100 ms pieces. Prints what the server heard and when, the
// answer's transcript as it comes, and saves the answer's audio as a WAV file.
// The bearer token, if the orchestrator wants one, comes from $OMNISTAGE_TOKEN.
import fs from "node:fs";
import WebSocket from "ws";

let base = "http://127.0.0.1:8000";
let wav = "omnistage_answer.wav";
let model = "omni-demo";
let input = "";
for (const arg of process.argv.slice(2)) {
  if (arg.startsWith("--base=")) base = arg.slice(7);
  else if (arg.startsWith("--wav=")) wav = arg.slice(6);
  else if (arg.startsWith("--model=")) model = arg.slice(8);
  else input = arg;
}
if (!input) {
  console.error("usage: node talk.mjs [--base=URL] [--wav=FILE] [--model=ID] question.pcm");
  process.exit(2);
}
const speech = fs.readFileSync(input);
const token = (process.env.OMNISTAGE_TOKEN || "").trim() || "none";
const socket = new WebSocket(`${base.replace(/^http/, "ws")}/v1/realtime?model=${model}`,
                             { headers: { Authorization: `Bearer ${token}` } });
const quit = (message) => {
  console.error(`talk: ${message}`);
  process.exit(1);
};
const deadline = setTimeout(() => quit("no answer within 120 s"), 120000);
socket.on("error", (e) => quit(e.message));
socket.on("close", (code) => quit(`the connection closed (${code})`));

const audio = [];
socket.on("message", (data) => {
  const event = JSON.parse(data.toString());
  switch (event.type) {
    case "session.created":
      talk().catch((e) => quit(e.message));
      break;
    case "input_audio_buffer.speech_started":
      console.error(`talk: speech started at ${event.audio_start_ms} ms`);
      break;
    case "input_audio_buffer.speech_stopped":
      console.error(`talk: speech stopped at ${event.audio_end_ms} ms`);
      break;
    case "conversation.item.input_audio_transcription.completed":
      console.error(`talk: heard "${event.transcript}"`);
      break;
    case "response.output_audio_transcript.delta":
      process.stdout.write(event.delta);
      break;
    case "response.output_audio.delta":
      audio.push(Buffer.from(event.delta, "base64"));
      break;
    case "error":
      console.error(`talk: error ${event.error.code}: ${event.error.message}`);
      break;
    case "response.done": {
      process.stdout.write("\n");
      const pcm = Buffer.concat(audio);
      fs.writeFileSync(wav, Buffer.concat([wavHeader(pcm.length), pcm]));
      console.error(`talk: response ${event.response.status}; ` +
                    `${(pcm.length / 48000).toFixed(2)} s of audio saved to ${wav}`);
      clearTimeout(deadline);
      socket.removeAllListeners("close");
      socket.close();
      process.exitCode = event.response.status === "completed" ? 0 : 1;
      break;
    }
  }
});

async function talk() {
  const stream = Buffer.concat([Buffer.alloc(500 * 48), speech, Buffer.alloc(1500 * 48)]);
  const began = Date.now();
  for (let at = 0, n = 0; at < stream.length; at += 4800, n++) {
    if (socket.readyState !== WebSocket.OPEN) return;
    socket.send(JSON.stringify({ type: "input_audio_buffer.append",
                                 audio: stream.subarray(at, at + 4800).toString("base64") }));
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, began + (n + 1) * 100 - Date.now())));
  }
}

// A 44-byte WAV header for `bytes` of 24 kHz 16-bit mono PCM.
function wavHeader(bytes) {
  const h = Buffer.alloc(44);
  h.write("RIFF", 0);
  h.writeUInt32LE(36 + bytes, 4);
  h.write("WAVEfmt ", 8);
  h.writeUInt32LE(16, 16);
  h.writeUInt16LE(1, 20);
  h.writeUInt16LE(1, 22);
  h.writeUInt32LE(24000, 24);
  h.writeUInt32LE(48000, 28);
  h.writeUInt16LE(2, 32);
  h.writeUInt16LE(16, 34);
  h.write("data", 36);
  h.writeUInt32LE(bytes, 40);
  return h;
}
