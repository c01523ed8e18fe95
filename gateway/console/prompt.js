// The console's prompt box: one chat completion through the gateway's own
// OpenAI API (POST /v1/chat/completions, stream: true, modalities text and
// audio with format pcm16, as OpenAI's API takes them), its text shown as the
// deltas arrive, its audio — base64 PCM16 chunks, 24 kHz mono as OpenAI's
// pcm16 is — made into a WAV blob for an <audio> element once it ended.

export const SAMPLE_RATE_HZ = 24000;

function decodeBase64(text) {
  const bytes = atob(text);
  const out = new Uint8Array(bytes.length);
  for (let i = 0; i < bytes.length; ++i) out[i] = bytes.charCodeAt(i);
  return out;
}

// A WAV file (RIFF, PCM 16-bit little-endian mono) around `chunks`' bytes.
export function wavBlob(chunks, sampleRateHz) {
  let size = chunks.reduce((sum, c) => sum + c.length, 0);
  size -= size % 2;  // Whole samples only.
  const wav = new Uint8Array(44 + size);
  const view = new DataView(wav.buffer);
  const ascii = (offset, text) => {
    for (let i = 0; i < text.length; ++i) view.setUint8(offset + i, text.charCodeAt(i));
  };
  ascii(0, "RIFF");
  view.setUint32(4, 36 + size, true);
  ascii(8, "WAVE");
  ascii(12, "fmt ");
  view.setUint32(16, 16, true);
  view.setUint16(20, 1, true);  // PCM.
  view.setUint16(22, 1, true);  // Mono.
  view.setUint32(24, sampleRateHz, true);
  view.setUint32(28, sampleRateHz * 2, true);
  view.setUint16(32, 2, true);
  view.setUint16(34, 16, true);
  ascii(36, "data");
  view.setUint32(40, size, true);
  let offset = 44;
  for (const chunk of chunks) {
    const take = Math.min(chunk.length, 44 + size - offset);
    wav.set(chunk.subarray(0, take), offset);
    offset += take;
  }
  return new Blob([wav], { type: "audio/wav" });
}

// The largest absolute sample of PCM16 little-endian `chunks`.
function peakOf(chunks) {
  let peak = 0;
  const joined = new Uint8Array(chunks.reduce((sum, c) => sum + c.length, 0));
  let offset = 0;
  for (const chunk of chunks) {
    joined.set(chunk, offset);
    offset += chunk.length;
  }
  const view = new DataView(joined.buffer);
  for (let i = 0; i + 1 < joined.length; i += 2) {
    peak = Math.max(peak, Math.abs(view.getInt16(i, true)));
  }
  return peak;
}

// Reads server-sent events from `response`'s body, calling `onData` with each
// event's parsed data until "[DONE]".
async function readEvents(response, onData) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffered = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffered += decoder.decode(value, { stream: true });
    let end;
    while ((end = buffered.indexOf("\n\n")) >= 0) {
      const event = buffered.slice(0, end);
      buffered = buffered.slice(end + 2);
      for (const line of event.split("\n")) {
        if (!line.startsWith("data:")) continue;
        const data = line.slice(5).trim();
        if (data === "[DONE]") return;
        onData(JSON.parse(data));
      }
    }
  }
}

// Sends `prompt` as `model` with the `token` (may be ""), showing the reply in
// `view` ({text, status, audio} elements). Resolves once the stream ended.
export async function sendPrompt({ prompt, model, token, withAudio, view }) {
  const body = { model, messages: [{ role: "user", content: prompt }], stream: true };
  if (withAudio) {
    body.modalities = ["text", "audio"];
    body.audio = { voice: "alloy", format: "pcm16" };
  }
  const headers = { "Content-Type": "application/json" };
  if (token) headers.Authorization = `Bearer ${token}`;
  view.text.textContent = "";
  view.status.textContent = "sending…";
  const started = performance.now();
  const response = await fetch("/v1/chat/completions", { method: "POST", headers,
                                                          body: JSON.stringify(body) });
  if (!response.ok) {
    const refused = await response.json().catch(() => ({}));
    view.status.textContent = `HTTP ${response.status}: ${refused.error?.message || ""}`;
    return;
  }
  const chunks = [];
  let id = "", finish = "", failure = "";
  await readEvents(response, (chunk) => {
    if (chunk.error) {
      failure = chunk.error.message;
      return;
    }
    id = chunk.id || id;
    const choice = (chunk.choices || [])[0];
    if (!choice) return;
    if (choice.delta?.content) view.text.textContent += choice.delta.content;
    if (choice.delta?.audio?.data) chunks.push(decodeBase64(choice.delta.audio.data));
    finish = choice.finish_reason || finish;
    view.status.textContent = `${id} streaming… ${chunks.length} audio chunk(s)`;
  });
  const seconds = ((performance.now() - started) / 1000).toFixed(2);
  view.status.textContent = failure ? `${id} failed: ${failure}`
                                    : `${id} finished: ${finish || "?"} in ${seconds} s`;
  if (chunks.length > 0) {
    if (view.audio.src) URL.revokeObjectURL(view.audio.src);
    view.audio.src = URL.createObjectURL(wavBlob(chunks, SAMPLE_RATE_HZ));
    view.audio.dataset.peak = String(peakOf(chunks));
    // Plays when the browser lets it (the click that sent the prompt may count).
    view.audio.play().catch(() => {});
  }
}
