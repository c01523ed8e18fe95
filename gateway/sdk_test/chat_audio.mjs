// Chat completions whose user message is speech (an input_audio part), with the
// official OpenAI SDK (npm `openai`), against a gateway of the local voice
// agent: whole and streamed, text and audio back. Prints one JSON line of what
// came back; exits non-zero when a check fails.
//
//   node chat_audio.mjs BASE_URL MODEL QUESTION.wav
import assert from "node:assert/strict";
import fs from "node:fs";
import OpenAI from "openai";

const [base, model, wavPath] = process.argv.slice(2);
const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: "none", maxRetries: 0, timeout: 60000 });
const data = fs.readFileSync(wavPath).toString("base64");
const messages = [{
  role: "user",
  content: [{ type: "input_audio", input_audio: { data, format: "wav" } }],
}];

// Whole, text and audio.
const whole = await client.chat.completions.create({
  model, messages, modalities: ["text", "audio"], audio: { voice: "alloy", format: "wav" },
});
const message = whole.choices[0].message;
assert.equal(whole.choices[0].finish_reason, "stop");
assert.ok(message.content && message.content.trim().length > 0, "no text answered");
// The answer is the thinker's: the listener's caption of the question is not.
assert.ok(!/tomorrow morning/.test(message.content), `the caption is in the answer: ${message.content}`);
const answer = Buffer.from(message.audio.data, "base64");
assert.equal(answer.subarray(0, 4).toString(), "RIFF", "the audio is not a WAV file");
fs.writeFileSync(`${wavPath}.answer.wav`, answer);

// Streamed, text only: the same answer.
const stream = await client.chat.completions.create({ model, messages, stream: true });
let streamed = "";
for await (const chunk of stream) streamed += chunk.choices[0]?.delta?.content ?? "";
assert.equal(streamed, message.content, "the streamed answer differs from the whole one");

// Text and speech in one message, in order.
const mixed = await client.chat.completions.create({
  model,
  messages: [{ role: "user", content: [{ type: "text", text: "Listen." },
                                       { type: "input_audio", input_audio: { data, format: "wav" } }] }],
});
assert.ok(mixed.choices[0].message.content.length > 0);

// A part that is not audio: the SDK's BadRequestError naming it.
try {
  await client.chat.completions.create({
    model,
    messages: [{ role: "user", content: [{ type: "input_audio",
                                          input_audio: { data: "bm90IGF1ZGlv", format: "wav" } }] }],
  });
  assert.fail("a part that is not audio was taken");
} catch (e) {
  assert.ok(e instanceof OpenAI.BadRequestError, String(e));
  assert.equal(e.param, "messages[0].content[0].input_audio.data");
}
console.log(JSON.stringify({ answer: message.content, audio_bytes: answer.length }));
