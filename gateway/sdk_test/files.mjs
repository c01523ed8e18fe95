// The official OpenAI SDK (npm `openai`, unchanged) using the omnistage
// gateway's Files API, as a user of the Batch API would. Run by
// gateway/files_sdk_test.sh:
//
//   OMNISTAGE_TOKEN=<owner's token> OTHER_TOKEN=<another identity's> \
//     node files.mjs <gateway base URL> <output dir> <phase>
//
// Phases:
//   upload  files.create (a JSONL file, purpose batch), retrieve, list (also
//           page by page, one file a page), content: each the same file and
//           bytes; another identity's retrieve, content and delete are the
//           SDK's NotFoundError and its list lacks the file; a purpose other
//           than batch is a BadRequestError naming purpose. Writes
//           <dir>/file_id.
//   after   the file <dir>/file_id names is still there, its bytes the same
//           (the gateway was restarted between the phases); then
//           files.delete, after which retrieve is a NotFoundError.
// Prints one JSON line, and exits non-zero on failure.
import fs from "node:fs";
import path from "node:path";
import OpenAI, { toFile } from "openai";

const [base, out, phase] = process.argv.slice(2);
const owner = new OpenAI({ baseURL: `${base}/v1`, apiKey: process.env.OMNISTAGE_TOKEN, maxRetries: 0 });
const other = new OpenAI({ baseURL: `${base}/v1`, apiKey: process.env.OTHER_TOKEN, maxRetries: 0 });

function fail(message) {
  console.log(JSON.stringify({ ok: false, message }));
  process.exit(1);
}

// The error a call is refused with, as {status, type, param}.
async function refusal(call) {
  try {
    await call();
  } catch (e) {
    return { status: e.status, type: e.constructor.name, param: e.param ?? null };
  }
  return { status: 200 };
}

const lines = [];
for (let i = 0; i < 5; i++) {
  lines.push(JSON.stringify({
    custom_id: `line-${i}`, method: "POST", url: "/v1/chat/completions",
    body: { model: "omni-demo", messages: [{ role: "user", content: `Say ${i}.` }], max_tokens: 8 },
  }));
}
const content = lines.join("\n") + "\n";
const idPath = path.join(out, "file_id");

if (phase === "upload") {
  const file = await owner.files.create({
    file: await toFile(Buffer.from(content), "requests.jsonl"), purpose: "batch",
  });
  if (!file.id.startsWith("file-") || file.bytes !== Buffer.byteLength(content) ||
      file.filename !== "requests.jsonl" || file.purpose !== "batch" || file.object !== "file") {
    fail(`create: ${JSON.stringify(file)}`);
  }
  // Two more, for the pages below.
  for (const name of ["b.jsonl", "c.jsonl"]) {
    await owner.files.create({ file: await toFile(Buffer.from(content), name), purpose: "batch" });
  }
  const got = await owner.files.retrieve(file.id);
  if (JSON.stringify(got) !== JSON.stringify(file)) fail(`retrieve: ${JSON.stringify(got)}`);
  const listed = [];
  for await (const f of owner.files.list({ purpose: "batch" })) listed.push(f.id);
  if (listed.length !== 3 || listed[2] !== file.id) fail(`list: ${JSON.stringify(listed)}`);
  // One a page: the SDK follows has_more and `after` through all three.
  const paged = [];
  for await (const f of owner.files.list({ limit: 1 })) paged.push(f.id);
  if (JSON.stringify(paged) !== JSON.stringify(listed)) fail(`pages: ${JSON.stringify(paged)}`);
  const bytes = await (await owner.files.content(file.id)).text();
  if (bytes !== content) fail(`content: ${bytes.slice(0, 200)}`);

  const refused = {
    retrieve: await refusal(() => other.files.retrieve(file.id)),
    content: await refusal(() => other.files.content(file.id)),
    delete: await refusal(() => other.files.delete(file.id)),
    purpose: await refusal(async () => owner.files.create({
      file: await toFile(Buffer.from(content), "x.jsonl"), purpose: "fine-tune",
    })),
  };
  for (const what of ["retrieve", "content", "delete"]) {
    if (refused[what].status !== 404 || refused[what].type !== "NotFoundError") {
      fail(`another identity's ${what}: ${JSON.stringify(refused[what])}`);
    }
  }
  if (refused.purpose.status !== 400 || refused.purpose.param !== "purpose") {
    fail(`purpose fine-tune: ${JSON.stringify(refused.purpose)}`);
  }
  const others = [];
  for await (const f of other.files.list()) others.push(f.id);
  if (others.length !== 0) fail(`another identity lists ${JSON.stringify(others)}`);
  fs.writeFileSync(idPath, file.id);
  console.log(JSON.stringify({ ok: true, id: file.id, listed: listed.length, refused }));
} else if (phase === "after") {
  const id = fs.readFileSync(idPath, "utf8");
  const bytes = await (await owner.files.content(id)).text();
  if (bytes !== content) fail(`after the restart: ${bytes.slice(0, 200)}`);
  const deleted = await owner.files.delete(id);
  if (deleted.id !== id || deleted.deleted !== true) fail(`delete: ${JSON.stringify(deleted)}`);
  const gone = await refusal(() => owner.files.retrieve(id));
  if (gone.status !== 404) fail(`retrieve after delete: ${JSON.stringify(gone)}`);
  console.log(JSON.stringify({ ok: true, id, deleted: true }));
} else {
  fail(`unknown phase ${phase}`);
}
