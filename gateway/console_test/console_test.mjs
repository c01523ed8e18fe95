// The gateway's live console in headless Chromium (Debian's, driven by
// playwright-core): run by gateway/console_browser_test.sh, which starts the pipeline
// and the gateway with tokens on.
//
//   node console_test.mjs
// Environment: BASE (the gateway's http://host:port), ADMIN (an admin's
// token), KILL_PID (a talker worker to kill), KILL_REPLICA (its replica
// index), CHROMIUM (the browser), SHOTS (where screenshots go).
// Prints one JSON line of what it saw; exits 1 with the reason on a failure.
// Screenshots: console.png (after the kill), console_reported.png (with what
// the orchestrator may report besides: scaling, recent requests).
import { chromium } from "playwright-core";

const env = (name) => {
  if (!process.env[name]) throw new Error(`${name} is not set`);
  return process.env[name];
};
const base = env("BASE");
const shots = env("SHOTS");
const seen = {};
const problems = [];

function check(condition, what) {
  if (!condition) throw new Error(what);
}

const browser = await chromium.launch({
  executablePath: env("CHROMIUM"),
  // Root in a container: Chromium's own sandbox cannot start there.
  args: ["--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
         "--autoplay-policy=no-user-gesture-required"],
});
let page;
try {
  page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
  page.setDefaultTimeout(30000);
  page.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
  // Nothing the page asks for is missing (the browser's /favicon.ico too).
  page.on("response", (r) => {
    if (r.status() === 404) problems.push(`404: ${r.url()}`);
  });
  page.on("console", (m) => {
    if (/Content Security Policy|Uncaught/.test(m.text())) problems.push(`console: ${m.text()}`);
  });

  // Without a token the page says the status needs one.
  await page.goto(`${base}/console`);
  await page.locator("#status-error", { hasText: "HTTP 401" }).waitFor();
  seen.without_token = await page.textContent("#status-error");
  // The icon a browser asks for: none, and no 404 (headless Chromium does not ask).
  seen.favicon = await page.evaluate(async () => (await fetch("/favicon.ico")).status);
  check(seen.favicon === 204, `/favicon.ico answered ${seen.favicon}`);

  // With the admin's: the stages of the running pipeline, each replica live.
  await page.fill("#token", env("ADMIN"));
  await page.click("#token-form button");
  for (const stage of ["thinker", "talker", "vocoder"]) {
    await page.locator(`g.stage[data-stage="${stage}"]`).waitFor();
  }
  await page.locator('g.replica[data-stage="talker"][data-state="live"]').nth(1).waitFor();
  seen.stages = await page.$$eval("g.stage", (gs) => gs.map((g) => g.dataset.stage));
  seen.talker_replicas = await page.locator('g.replica[data-stage="talker"]').count();
  check(await page.isHidden("#status-error"), "the status error stays shown");

  // A prompt from the page: text streams in, the audio element gets a WAV
  // whose samples are not all zero (read back from the element's own source
  // and decoded by WebAudio).
  await page.fill("#prompt", "Tell me something about the sea.");
  await page.click("#send");
  await page.locator("#reply-status", { hasText: "finished" }).waitFor();
  seen.reply_status = await page.textContent("#reply-status");
  seen.reply = await page.textContent("#reply");
  check(seen.reply.trim().split(/\s+/).length >= 3, `little text: '${seen.reply}'`);
  seen.audio = await page.evaluate(async () => {
    const audio = document.getElementById("reply-audio");
    if (!audio.src) return { error: "no src" };
    const bytes = await (await fetch(audio.src)).arrayBuffer();
    const header = new TextDecoder().decode(new Uint8Array(bytes, 0, 4));
    const samples = new Int16Array(bytes.slice(44));
    let nonzero = 0, peak = 0;
    for (const s of samples) {
      if (s !== 0) ++nonzero;
      peak = Math.max(peak, Math.abs(s));
    }
    const decoded = await new OfflineAudioContext(1, 1, 24000).decodeAudioData(bytes.slice(0));
    const channel = decoded.getChannelData(0);
    let decodedPeak = 0;
    for (const v of channel) decodedPeak = Math.max(decodedPeak, Math.abs(v));
    return { header, samples: samples.length, nonzero, peak, seconds: decoded.duration,
             decoded_peak: decodedPeak, page_peak: Number(audio.dataset.peak) };
  });
  check(seen.audio.header === "RIFF", `the audio is not a WAV: ${JSON.stringify(seen.audio)}`);
  check(seen.audio.nonzero > seen.audio.samples / 10 && seen.audio.decoded_peak > 0.01,
        `the audio is silent: ${JSON.stringify(seen.audio)}`);

  // That request among the recent ones, with its outcome.
  const id = /chatcmpl-(\S+)/.exec(seen.reply_status)?.[1];
  check(id, `no request id in '${seen.reply_status}'`);
  const row = page.locator(`#recent tbody tr[data-request-id="${id}"]`);
  await row.waitFor();
  seen.recent_outcome = await row.getAttribute("data-outcome");
  seen.recent_source = await page.textContent("#recent-source");
  check(["stop", "length"].includes(seen.recent_outcome),
        `request ${id} shows outcome '${seen.recent_outcome}'`);
  // Its audio: when it was first heard, and how many stalls (a number).
  seen.recent_heard = await row.evaluate((r) => [r.cells[3].textContent, r.cells[4].textContent]);
  check(/^\d+ ms$/.test(seen.recent_heard[0]) && /^\d+( \(\d+ ms\))?$/.test(seen.recent_heard[1]),
        `request ${id} shows first audio and stalls ${JSON.stringify(seen.recent_heard)}`);

  // A talker worker killed by PID turns dead on the page; the other stays live.
  const replica = env("KILL_REPLICA");
  process.kill(Number(env("KILL_PID")), "SIGKILL");
  const started = Date.now();
  await page.locator(
      `g.replica[data-stage="talker"][data-replica="${replica}"][data-state="dead"]`).waitFor();
  seen.dead_after_ms = Date.now() - started;
  seen.talker_states = await page.$$eval('g.replica[data-stage="talker"]',
                                         (gs) => gs.map((g) => g.dataset.state));
  check(seen.talker_states.filter((s) => s === "live").length === 1,
        `talker replicas: ${seen.talker_states}`);
  await page.screenshot({ path: `${shots}/console.png`, fullPage: true });

  // The orchestrator's own scaling signal for the talker: one replica asked
  // for (one request has passed).
  const scaling = page.locator('g.stage[data-stage="talker"] [data-field="scaling"]');
  await scaling.waitFor();
  seen.real_scaling = await scaling.textContent();
  check(/saturation \d+\.\d\d .*recommended 1 /.test(seen.real_scaling),
        `the talker's scaling: '${seen.real_scaling}'`);

  // A saturated stage and reported recent requests, added to the
  // orchestrator's real answers on their way to the page: each stage's
  // saturation and recommended replicas, and its recent requests in place of
  // the gateway's record.
  await page.route("**/console/status", async (route) => {
    const response = await route.fetch();
    const json = await response.json();
    for (const stage of json.pipeline.stages) {
      stage.scaling = { heldRequests: 1, waitingRequests: 2, liveReplicas: 1, capacity: 2,
                        saturation: 1.5, arrivalsPerSecond: 3.25, slotSecondsPerRequest: 0.4,
                        demandReplicas: 2.6, recommendedReplicas: 3 };
      if (stage.name === "talker") {
        Object.assign(stage.scaling, { audioRequests: 12, audioCapacityKnown: true,
                                       audioStreamCapacity: 19.6, audioDemandReplicas: 0.9,
                                       audioLimited: true });
      }
    }
    json.pipeline.audio = { playing: 12, capacityKnown: true, capacityStreams: 62.2,
                            secondsPerAudioSecond: 0.43, admissionLimit: 0 };
    json.pipeline.recent = [{
      requestId: "req-reported", identity: "ops", finishReason: "FINISH_REASON_LENGTH",
      error: "", stages: [{ stageId: 0, replica: 0, instanceId: "a" },
                          { stageId: 1, replica: 1, instanceId: "b" }],
      outputTokens: "24", audioSeconds: 3.5, firstOutputSeconds: 0.1, durationSeconds: 0.75,
      finishedUnixMs: String(Date.now()), firstAudioSeconds: 0.25, realTimeFactor: 0.4,
      playbackStalls: "2", stalledSeconds: 0.125,
      firstOutputObjective: "OBJECTIVE_OUTCOME_MET", firstAudioObjective: "OBJECTIVE_OUTCOME_MISSED",
      objectiveMiss: "queued", criticality: "CRITICALITY_STANDARD",
    }];
    json.pipeline.objectives = { met: "40", missed: "3", shed: "5",
                                 misses: { queued: "2", slow_replica: "1" } };
    await route.fulfill({ response, json });
  });
  await page.waitForFunction(
      () => /saturation 1\.50/.test(document.querySelector(
          'g.stage[data-stage="talker"] [data-field="scaling"]')?.textContent || ""),
      null, { timeout: 10000 }).catch(() => {});
  seen.scaling = await scaling.textContent();
  check(/saturation 1\.50 .*recommended 3 /.test(seen.scaling), `scaling: '${seen.scaling}'`);
  seen.stage_audio = await page.textContent('g.stage[data-stage="talker"] [data-field="audio"]');
  check(seen.stage_audio === "audio 12 of 20 at real time (limits)",
        `the talker's audio: '${seen.stage_audio}'`);
  check(await page.locator('g.stage[data-stage="vocoder"] [data-field="audio"]').count() === 0,
        "the vocoder shows audio it did not report");
  seen.summary = await page.textContent("#summary");
  check(/audio 12 playing, capacity 62 at real time/.test(seen.summary),
        `the summary: '${seen.summary}'`);
  check(/objectives met 40 of 43 \(missed: queued 2, slow_replica 1\), 5 shed/.test(seen.summary),
        `the summary's objectives: '${seen.summary}'`);
  const reported = page.locator('#recent tbody tr[data-request-id="req-reported"]');
  await reported.waitFor();
  seen.reported = await reported.evaluate((row) => ({
    outcome: row.dataset.outcome, first_audio: row.cells[3].textContent,
    stalls: row.cells[4].textContent, replicas: row.cells[5].textContent,
    objective: row.cells[7].textContent }));
  check(seen.reported.outcome === "length" && seen.reported.replicas === "thinker r0 → talker r1" &&
        seen.reported.first_audio === "250 ms" && seen.reported.stalls === "2 (125 ms)" &&
        seen.reported.objective === "missed (queued)",
        `the orchestrator's recent request: ${JSON.stringify(seen.reported)}`);
  await page.screenshot({ path: `${shots}/console_reported.png`, fullPage: true });
  check(problems.length === 0, problems.join("; "));
  console.log(JSON.stringify(seen));
} catch (e) {
  if (page) await page.screenshot({ path: `${shots}/console_failed.png`, fullPage: true })
      .catch(() => {});
  console.error(`FAIL: ${e.message}\nseen: ${JSON.stringify(seen)}\n${problems.join("\n")}`);
  process.exitCode = 1;
} finally {
  // A poll may be on its way through the route: its end is not waited for.
  if (page) await page.unrouteAll({ behavior: "ignoreErrors" }).catch(() => {});
  await browser.close();
}
