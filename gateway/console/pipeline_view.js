// The pipeline as an SVG picture: the admission queue, then each stage left
// to right with its replicas (state by colour, load against capacity, bound
// requests) and, when the status carries it, the stage's scaling signal.
// Every name shown is set as text, never as markup.

const SVG = "http://www.w3.org/2000/svg";
const COLUMN = 250;  // A column's width.
const GAP = 46;      // Between columns: the arrows.
const HEAD = 58;     // A stage's title lines.
const REPLICA = 50;  // A replica's row.
const SCALING = 34;  // The scaling lines, when present.
const AUDIO = 16;    // The audio line, when the stage held audio.

function el(name, attributes, text) {
  const node = document.createElementNS(SVG, name);
  for (const [key, value] of Object.entries(attributes || {})) node.setAttribute(key, value);
  if (text !== undefined) node.textContent = text;
  return node;
}

// "STATE_LIVE" -> "live"; anything else the status may grow -> "unknown".
export function replicaState(replica) {
  const state = String(replica.state || "").replace(/^STATE_/, "").toLowerCase();
  return ["live", "draining", "dead"].includes(state) ? state : "unknown";
}

// Requests waiting in the admission queue, every priority and identity together.
export function queuedTotal(pipeline) {
  return (pipeline.queued || []).reduce((sum, q) => sum + Number(q.waiting || 0), 0);
}

function drawQueue(svg, pipeline, height) {
  const g = el("g", { class: "queue", transform: "translate(0,0)" });
  g.append(el("rect", { class: "queue-box", x: 0, y: 0, width: COLUMN - 60, height, rx: 6 }));
  g.append(el("text", { class: "title", x: 12, y: 22 }, "admission"));
  g.append(el("text", { x: 12, y: 44, "data-field": "queued" },
              `queued ${queuedTotal(pipeline)}`));
  g.append(el("text", { x: 12, y: 64, "data-field": "in-flight" },
              `in flight ${Number(pipeline.inFlightRequests || 0)}`));
  g.append(el("text", { class: "small", x: 12, y: 84 },
              pipeline.accepting === false ? "not accepting (draining)" : "accepting"));
  for (const [i, q] of (pipeline.queued || []).slice(0, 4).entries()) {
    g.append(
        el('text', {class: 'small', x: 12, y: 106 + 16 * i},
           `${q.priority < 0 ? 'batch' : `p${q.priority}`} ${q.identity || '(anonymous)'}: ` +
               `${q.waiting}`));
  }
  svg.append(g);
}

function drawReplica(stage, replica, y) {
  const state = replicaState(replica);
  const load = Number(replica.loadRequests || 0);
  const capacity = Number(replica.capacity || 0);
  const g = el("g", {
    class: `replica ${state}`, transform: `translate(10,${y})`,
    "data-stage": stage.name, "data-replica": replica.replica, "data-state": state,
  });
  g.append(el("title", {}, replica.lastError ? `${state}: ${replica.lastError}` : state));
  g.append(el("rect", { class: "body", x: 0, y: 0, width: COLUMN - 20, height: REPLICA - 6,
                        rx: 4 }));
  g.append(el("text", { class: "on-state", x: 8, y: 16 },
              `r${replica.replica} ${state}  ${replica.address || ""}`));
  g.append(el("text", { class: "on-state", x: 8, y: 34 },
              `load ${load}/${capacity}  bound ${Number(replica.boundRequests || 0)}`));
  const track = 70;
  g.append(el("rect", { class: "load-track", x: COLUMN - 30 - track, y: 26, width: track,
                        height: 8, rx: 2 }));
  const fraction = capacity > 0 ? Math.min(1, load / capacity) : 0;
  g.append(el("rect", { class: "load-bar", x: COLUMN - 30 - track, y: 26,
                        width: Math.round(track * fraction), height: 8, rx: 2 }));
  return g;
}

// The stage's audio streams and its capacity at real time
// (docs/observability.md, "Audio capacity per stage"); "" before any audio.
export function stageAudio(scaling) {
  if (!scaling || (!Number(scaling.audioRequests || 0) && !scaling.audioCapacityKnown)) return "";
  const requests = `audio ${Number(scaling.audioRequests || 0)}`;
  if (!scaling.audioCapacityKnown) return `${requests}, capacity not measured yet`;
  return `${requests} of ${Number(scaling.audioStreamCapacity || 0).toFixed(0)} at real time` +
         (scaling.audioLimited ? " (limits)" : "");
}

function stageHeight(stage) {
  return HEAD + REPLICA * (stage.replicas || []).length + (stage.scaling ? SCALING : 0) +
         (stageAudio(stage.scaling) ? AUDIO : 0) + 6;
}

function drawStage(svg, stage, x, height) {
  const g = el("g", { class: "stage", transform: `translate(${x},0)`, "data-stage": stage.name });
  g.append(el("rect", { class: "stage-box", x: 0, y: 0, width: COLUMN, height, rx: 6 }));
  g.append(el("text", { class: "title", x: 10, y: 20 }, `${stage.stageId}  ${stage.name}`));
  const modality = String(stage.outputModality || "").replace(/^MODALITY_/, "").toLowerCase();
  const toClient = stage.finalOutput ? " (to the client)" : "";
  g.append(el("text", { class: "small", x: 10, y: 38 },
              `${stage.engine || "?"} → ${modality}${toClient}`));
  const live = (stage.replicas || []).filter((r) => replicaState(r) === "live").length;
  g.append(el("text", { class: "small", x: 10, y: 52 },
              `${live}/${(stage.replicas || []).length} live` +
              (stage.discoveryError ? `  discovery: ${stage.discoveryError}` : "")));
  let y = HEAD;
  for (const replica of stage.replicas || []) {
    g.append(drawReplica(stage, replica, y));
    y += REPLICA;
  }
  if (stage.scaling) {
    const s = stage.scaling;
    // Above 1 the stage is short of slots.
    const saturated = Number(s.saturation || 0) > 1 ? " saturated" : "";
    g.append(el("text", { class: `small${saturated}`, x: 10, y: y + 12, "data-field": "scaling" },
                `saturation ${Number(s.saturation || 0).toFixed(2)}  ` +
                `recommended ${Number(s.recommendedReplicas || 0)} replica(s)`));
    g.append(el("text", { class: "small", x: 10, y: y + 28 },
                `${Number(s.arrivalsPerSecond || 0).toFixed(1)} req/s  held ` +
                `${Number(s.heldRequests || 0)}  waiting ${Number(s.waitingRequests || 0)}`));
    const audio = stageAudio(s);
    if (audio) {
      g.append(el("text", { class: `small${s.audioLimited ? " saturated" : ""}`, x: 10,
                            y: y + 44, "data-field": "audio" }, audio));
    }
  }
  svg.append(g);
}

function drawArrow(svg, x, y) {
  svg.append(el("path", { class: "arrow", d: `M${x + 6},${y} h${GAP - 16} m-7,-6 l7,6 l-7,6` }));
}

// Draws `pipeline` (PipelineStatus in protobuf's JSON) into `svg`, replacing
// what it held.
export function drawPipeline(svg, pipeline) {
  svg.replaceChildren();
  const stages = pipeline.stages || [];
  const height = Math.max(140, ...stages.map(stageHeight));
  drawQueue(svg, pipeline, height);
  let x = COLUMN - 60;
  for (const stage of stages) {
    drawArrow(svg, x, 30);
    x += GAP;
    drawStage(svg, stage, x, height);
    x += COLUMN;
  }
  svg.setAttribute("width", x + 2);
  svg.setAttribute("height", height + 2);
  svg.setAttribute("viewBox", `-1 -1 ${x + 2} ${height + 2}`);
}
