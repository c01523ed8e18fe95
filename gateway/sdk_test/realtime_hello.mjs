// The Realtime API with the official OpenAI SDK (npm `openai` and `ws`), as
// docs/openai.md shows it: one typed question, answered in speech; the
// transcript streams to stdout and the audio (24 kHz 16-bit mono PCM) is saved.
// The SDK dials wss:// only: run it against a gateway serving HTTPS, with its
// CA in NODE_EXTRA_CA_CERTS.
//
//   NODE_EXTRA_CA_CERTS=certs/ca.crt node gateway/sdk_test/realtime_hello.mjs \
//       [https://127.0.0.1:8443] [answer.pcm]
//
// The bearer token, if the orchestrator wants one, comes from $OMNISTAGE_TOKEN.
import fs from "node:fs";
import OpenAI from "openai";
import { OpenAIRealtimeWS } from "openai/realtime/ws";

const [base = "https://127.0.0.1:8443", file = "answer.pcm"] = process.argv.slice(2);
const client = new OpenAI({ baseURL: `${base}/v1`,
                            apiKey: (process.env.OMNISTAGE_TOKEN || "").trim() || "none" });
const rt = new OpenAIRealtimeWS({ model: "omni-demo" }, client);
const audio = [];
rt.on("response.output_audio_transcript.delta", (e) => process.stdout.write(e.delta));
rt.on("response.output_audio.delta", (e) => audio.push(Buffer.from(e.delta, "base64")));
rt.on("response.done", (e) => {
  const pcm = Buffer.concat(audio);
  fs.writeFileSync(file, pcm);
  console.log(`\n${e.response.status}: ${(pcm.length / 48000).toFixed(2)} s of audio in ${file}`);
  rt.close();
});
rt.on("error", (e) => {
  console.error(`realtime_hello: ${e.message}`);
  process.exit(1);
});
rt.socket.on("open", () => {
  rt.send({ type: "session.update", session: { type: "realtime", output_modalities: ["audio"],
                                               audio: { output: { voice: "alloy" } } } });
  rt.send({ type: "conversation.item.create", item: { type: "message", role: "user",
            content: [{ type: "input_text", text: "Tell me about the sea." }] } });
  rt.send({ type: "response.create" });
});
