// The live console: polls GET /console/status every second with the admin
// token the page was given (Authorization: Bearer; kept in this tab's
// sessionStorage), draws the pipeline, lists the batches running and recent
// requests with their outcome, and sends prompts (prompt.js). docs/console.md.
import { drawPipeline, queuedTotal } from "/console/pipeline_view.js";
import { sendPrompt } from "/console/prompt.js";

const POLL_MS = 1000;
const TOKEN_KEY = "omnistage-console-token";
const $ = (id) => document.getElementById(id);

let token = sessionStorage.getItem(TOKEN_KEY) || "";
let model = "";
let previous = null;  // The last poll: {at (ms), servedTotal}.
let pollTimer = 0;

function authHeaders() {
  return token ? { Authorization: `Bearer ${token}` } : {};
}

function showError(text) {
  $("status-error").textContent = text;
  $("status-error").hidden = !text;
}

// Completions per second the gateway served, from successive polls.
function servedRate(status, now) {
  const total = Number(status.gateway?.servedTotal || 0);
  let rate = null;
  if (previous && now > previous.at) {
    rate = ((total - previous.servedTotal) * 1000) / (now - previous.at);
  }
  previous = { at: now, servedTotal: total };
  return rate;
}

// The audio streams playing and the pipeline's measured audio capacity
// (docs/observability.md, "Audio capacity"); "" before any audio.
function audioSummary(audio) {
  if (!audio || (!audio.capacityKnown && !Number(audio.playing || 0))) return "";
  const capacity = audio.capacityKnown
      ? `capacity ${Number(audio.capacityStreams).toFixed(0)} at real time`
      : "capacity not measured yet";
  return ` · audio ${Number(audio.playing || 0)} playing, ${capacity}`;
}

// How requests' latency objectives went (docs/observability.md, "Latency
// objectives"): met of judged, the misses by why, the sheddable requests
// shed; "" before any.
function objectivesSummary(tally) {
  const met = Number(tally?.met || 0);
  const missed = Number(tally?.missed || 0);
  const shed = Number(tally?.shed || 0);
  if (met + missed + shed === 0) return "";
  const why = Object.entries(tally.misses || {})
      .filter(([, n]) => Number(n) > 0)
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([reason, n]) => `${reason} ${Number(n)}`)
      .join(", ");
  return ` · objectives met ${met} of ${met + missed}` + (why ? ` (missed: ${why})` : "") +
         (shed ? `, ${shed} shed` : "");
}

function showSummary(status, rate) {
  const pipeline = status.pipeline || {};
  $("summary").textContent =
      `${Number(pipeline.inFlightRequests || 0)} in flight · ${queuedTotal(pipeline)} queued · ` +
      `served ${Number(status.gateway?.servedTotal || 0)}` +
      (rate === null ? "" : ` (${rate.toFixed(2)}/s)`) + audioSummary(pipeline.audio) +
      objectivesSummary(pipeline.objectives);
  $("node").textContent = pipeline.nodeId ? `orchestrator ${pipeline.nodeId}` : "";
}

function cell(row, text, className) {
  const td = row.insertCell();
  td.textContent = text;
  if (className) td.className = className;
}

// How a listener heard a request's audio (docs/observability.md, "How a
// listener hears it"): its first audio, and the stalls; "-" without audio.
function heardCells(row, firstAudioSeconds, stalls, stalledSeconds) {
  const heard = firstAudioSeconds >= 0;
  cell(row, heard ? `${(firstAudioSeconds * 1000).toFixed(0)} ms` : "-");
  const count = Number(stalls || 0);
  cell(row, !heard ? "-" : count === 0 ? "0"
                 : `${count} (${(Number(stalledSeconds || 0) * 1000).toFixed(0)} ms)`,
       count > 0 ? "stalled" : "");
}

// How a finished request's latency objectives went: "met", "missed (why)"
// or "-" without one judged.
function objectiveCell(r) {
  const outcomes = [r.firstOutputObjective, r.firstAudioObjective, r.betweenOutputsObjective]
      .map((o) => String(o || "").replace(/^OBJECTIVE_OUTCOME_/, ""));
  if (outcomes.includes("MISSED")) return `missed (${r.objectiveMiss || "?"})`;
  return outcomes.includes("MET") ? "met" : "-";
}

function finishedAt(unixMs) {
  const ms = Number(unixMs || 0);
  return ms > 0 ? new Date(ms).toLocaleTimeString() : "";
}

// The orchestrator's recent requests (PipelineStatus.recent) when it reports
// them, else the gateway's own record of the completions it served.
function showRecent(status) {
  const pipeline = status.pipeline || {};
  const body = $("recent").tBodies[0];
  body.replaceChildren();
  const fromPipeline = (pipeline.recent || []).length > 0;
  $("recent-source").textContent = fromPipeline ? "as the orchestrator finished them"
                                                : "as this gateway served them";
  if (fromPipeline) {
    const names = new Map((pipeline.stages || []).map((s) => [s.stageId, s.name]));
    for (const r of pipeline.recent) {
      const outcome = String(r.finishReason || "").replace(/^FINISH_REASON_/, "").toLowerCase();
      const row = body.insertRow();
      row.dataset.requestId = r.requestId;
      row.dataset.outcome = outcome;
      cell(row, r.requestId + (r.identity ? ` (${r.identity})` : ""));
      cell(row, outcome + (r.error ? `: ${r.error}` : ""), `outcome-${outcome}`);
      cell(row, `${Number(r.durationSeconds || 0).toFixed(2)} s`);
      heardCells(row, Number(r.audioSeconds || 0) > 0 ? Number(r.firstAudioSeconds) : -1,
                 r.playbackStalls, r.stalledSeconds);
      cell(row, (r.stages || []).map((s) => `${names.get(s.stageId) ?? s.stageId} r${s.replica}`)
                    .join(" → "));
      cell(row, finishedAt(r.finishedUnixMs));
      const objective = objectiveCell(r);
      cell(row, objective, objective.startsWith("missed") ? "stalled" : "");
    }
    return;
  }
  for (const r of status.gateway?.recent || []) {
    const row = body.insertRow();
    row.dataset.requestId = r.requestId;
    row.dataset.outcome = r.outcome;
    cell(row, r.requestId || "(none)");
    cell(row, r.outcome + (r.error ? `: ${r.error}` : ""), `outcome-${r.outcome}`);
    cell(row, `${Number(r.durationSeconds || 0).toFixed(2)} s`);
    heardCells(row, Number(r.firstAudioSeconds ?? -1), r.playbackStalls, r.stalledSeconds);
    cell(row, `HTTP ${r.httpStatus}`);
    cell(row, finishedAt(r.finishedUnixMs));
    cell(row, "-");
  }
}

// The Batch API's batches not finished, every owner's, with their counts
// (a gateway without the Batch API sends null: the section stays hidden).
function showBatches(batches) {
  $('batches-section').hidden = !Array.isArray(batches);
  const body = $('batches').tBodies[0];
  body.replaceChildren();
  for (const b of batches || []) {
    const row = body.insertRow();
    row.dataset.batchId = b.id;
    cell(row, b.id);
    cell(row, b.owner || '(anonymous)');
    cell(row, b.endpoint);
    cell(row, b.status);
    cell(row, `${Number(b.completed || 0)} of ${Number(b.total || 0)}`);
    cell(row, String(Number(b.failed || 0)), Number(b.failed || 0) > 0 ? 'stalled' : '');
    cell(row, finishedAt(Number(b.createdAt || 0) * 1000));
  }
}

async function poll() {
  clearTimeout(pollTimer);
  try {
    const response = await fetch("/console/status", { headers: authHeaders(), cache: "no-store" });
    if (!response.ok) {
      const refused = await response.json().catch(() => ({}));
      const hint = response.status === 401 || response.status === 403
          ? " — enter an admin token above" : "";
      showError(`/console/status: HTTP ${response.status}: ${refused.error?.message || ""}${hint}`);
    } else {
      const status = await response.json();
      showError("");
      showSummary(status, servedRate(status, Date.now()));
      drawPipeline($("pipeline"), status.pipeline || {});
      showRecent(status);
      showBatches(status.batches);
      document.body.dataset.polls = String(Number(document.body.dataset.polls || 0) + 1);
    }
  } catch (e) {
    showError(`/console/status: ${e.message}`);
  }
  pollTimer = setTimeout(poll, POLL_MS);
}

async function loadModel() {
  const response = await fetch("/v1/models", { headers: authHeaders() });
  if (response.ok) model = (await response.json()).data?.[0]?.id || "";
}

function start() {
  $("token").value = token;
  $("token-form").addEventListener("submit", (event) => {
    event.preventDefault();
    token = $("token").value.trim();
    if (token) sessionStorage.setItem(TOKEN_KEY, token);
    else sessionStorage.removeItem(TOKEN_KEY);
    poll();
  });
  $("prompt-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    $("send").disabled = true;
    try {
      if (!model) await loadModel();
      await sendPrompt({
        prompt: $("prompt").value, model, token, withAudio: $("with-audio").checked,
        view: { text: $("reply"), status: $("reply-status"), audio: $("reply-audio") },
      });
    } catch (e) {
      $("reply-status").textContent = `failed: ${e.message}`;
    } finally {
      $("send").disabled = false;
    }
  });
  loadModel().catch(() => {});
  poll();
}

start();
