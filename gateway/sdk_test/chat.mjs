// A chat completion with text and audio through the omnistage gateway, with
// the official OpenAI SDK (npm `openai`): the text streams to stdout, the audio
// is saved as a WAV file.
//
//   node gateway/sdk_test/chat.mjs [--base=http://127.0.0.1:8000] [--wav=out.wav] "prompt"
//
// The bearer token, if the orchestrator wants one, comes from $OMNISTAGE_TOKEN.
import fs from "node:fs";
import OpenAI from "openai";

let base = "http://127.0.0.1:8000";
let wav = "omnistage_openai.wav";
let model = "omni-demo";
const words = [];
for (const arg of process.argv.slice(2)) {
  if (arg.startsWith("--base=")) base = arg.slice(7);
  else if (arg.startsWith("--wav=")) wav = arg.slice(6);
  else if (arg.startsWith("--model=")) model = arg.slice(8);
  else words.push(arg);
}
const client = new OpenAI({
  baseURL: `${base}/v1`,
  // Whitespace around it ($(cat user.token) keeps the newline) is not the token's.
  apiKey: (process.env.OMNISTAGE_TOKEN || "").trim() || "none",
});
const stream = await client.chat.completions.create({
  model,
  messages: [{ role: "user", content: words.join(" ") || "Tell me about the sea." }],
  modalities: ["text", "audio"],
  audio: { voice: "alloy", format: "wav" },
  stream: true,
});
const audio = [];
for await (const chunk of stream) {
  const delta = chunk.choices[0]?.delta;
  if (delta?.content) process.stdout.write(delta.content);
  if (delta?.audio?.data) audio.push(Buffer.from(delta.audio.data, "base64"));
}
process.stdout.write("\n");
// The streamed header says "length unknown"; a file gets the real sizes.
const bytes = Buffer.concat(audio);
if (bytes.length >= 44) {
  bytes.writeUInt32LE(bytes.length - 8, 4);
  bytes.writeUInt32LE(bytes.length - 44, 40);
  fs.writeFileSync(wav, bytes);
  const seconds = (bytes.length - 44) / bytes.readUInt32LE(28);  // the header's byte rate
  console.error(`audio: ${seconds.toFixed(2)} s saved to ${wav}`);
}
