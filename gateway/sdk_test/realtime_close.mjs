// How Realtime connections end and are refused at the omnistage gateway, with
// plain `ws` clients over ws:// (the SDK hides the close codes and pongs
// itself). Run by gateway/realtime_close_test.sh:
//
//   node realtime_close.mjs <gateway base URL (http://)> <check> [gateway PID]
//
// Checks (each prints one JSON line, exits non-zero on failure):
//   limit     (--max_realtime_sessions=2) a third session is refused before
//             the upgrade: 503, OpenAI's JSON error, code too_many_sessions;
//             once one closes, a new one is admitted
//   idle      (--realtime_ping_interval_ms=100 --realtime_idle_timeout_ms=500)
//             a client that answers no ping is closed with 1001 "idle timeout"
//             after about the idle timeout; one that pongs stays open for
//             three of them and is still answered
//   drain     SIGTERM (sent here to PID) while one session is idle and another
//             has a response running: the idle one is closed with 1001 at
//             once, the other after its response.done (completed)
//   deadline  the same past --drain_timeout_ms: response.done (cancelled),
//             then 1001
import WebSocket from "ws";

const [base, check, gatewayPid] = process.argv.slice(2);
const url = `${base.replace(/^http/, "ws")}/v1/realtime`;
const since = Date.now();

function fail(message) {
  console.log(JSON.stringify({ check, ok: false, message }));
  process.exit(1);
}

// A client: its events in order, its close (code, reason, when, after how
// many events), its pings.
function connect(options = {}) {
  const client = { socket: new WebSocket(url, options), events: [], pings: 0, closed: null };
  const { socket } = client;
  const waiters = new Set();
  const wake = () => { for (const waiter of [...waiters]) waiter(); };
  socket.on("message", (data) => { client.events.push(JSON.parse(data.toString())); wake(); });
  socket.on("ping", () => { client.pings += 1; });
  socket.on("close", (code, reason) => {
    client.closed = { code, reason: reason.toString(), ms: Date.now() - since,
                      after: client.events.length };
    wake();
  });
  socket.on("error", (error) => { client.error = error; wake(); });
  // Resolves when `ready()` returns something; fails after `ms`.
  client.until = (what, ready, ms = 5000) => new Promise((resolve) => {
    const look = () => {
      const found = ready();
      if (found === undefined || found === null || found === false) return;
      waiters.delete(look);
      clearTimeout(timer);
      resolve(found);
    };
    const timer = setTimeout(() => fail(`no ${what} within ${ms} ms`), ms);
    waiters.add(look);
    look();
  });
  client.next = (type) => client.until(type, () => client.events.find((e) => e.type === type) ||
    (client.closed && fail(`closed (${client.closed.code}) before ${type}`)));
  client.close = () => client.until("close", () => client.closed);
  client.send = (event) => socket.send(JSON.stringify(event));
  return client;
}

// A response of `tokens` tokens of text, created in `client`'s session.
function respond(client, tokens) {
  client.send({ type: "session.update", session: { type: "realtime", output_modalities: ["text"],
                                                   max_output_tokens: tokens } });
  client.send({ type: "conversation.item.create",
                item: { type: "message", role: "user",
                        content: [{ type: "input_text", text: "Tell me about the sea." }] } });
  client.send({ type: "response.create" });
}

// The HTTP answer to an upgrade the gateway refused.
function refusal() {
  return new Promise((resolve) => {
    const socket = new WebSocket(url);
    socket.on("open", () => fail("a session past the limit was let in"));
    socket.on("error", () => {});
    socket.on("unexpected-response", (request, response) => {
      let body = "";
      response.on("data", (chunk) => { body += chunk; });
      response.on("end", () => resolve({ status: response.statusCode, body }));
    });
  });
}

async function limit() {
  const first = connect();
  const second = connect();
  await first.next("session.created");
  await second.next("session.created");
  const refused = await refusal();
  let error;
  try {
    ({ error } = JSON.parse(refused.body));
  } catch {
    fail(`not JSON: ${refused.body}`);
  }
  if (refused.status !== 503 || error?.type !== "server_error" ||
      error?.code !== "too_many_sessions" || !error?.message.includes("(2)")) {
    fail(`refusal: ${refused.status} ${refused.body}`);
  }
  first.socket.close(1000);
  await first.close();
  // The gateway freed the session before the connection closed.
  const third = connect();
  await third.next("session.created");
  second.socket.close(1000);
  third.socket.close(1000);
  await second.close();
  await third.close();
  return { refused: refused.status, code: error.code, admitted_after_close: true };
}

async function idle() {
  const silent = connect({ autoPong: false });
  const live = connect();
  await silent.next("session.created");
  await live.next("session.created");
  const opened = Date.now() - since;
  const closed = await silent.until("the idle close", () => silent.closed, 3000);
  const after = closed.ms - opened;
  if (closed.code !== 1001 || closed.reason !== "idle timeout") {
    fail(`silent client closed ${closed.code} '${closed.reason}'`);
  }
  if (after < 400) fail(`closed after ${after} ms, before the idle timeout`);
  if (silent.pings === 0) fail("the silent client was never pinged");
  // Three idle timeouts: the one that answers pings is still served.
  await new Promise((resolve) => setTimeout(resolve, 1500 - after));
  if (live.closed) fail(`the ponging client was closed ${live.closed.code}`);
  live.send({ type: "session.update", session: { type: "realtime" } });
  await live.next("session.updated");
  live.socket.close(1000);
  await live.close();
  return { silent_closed: closed.code, reason: closed.reason, after_ms: after,
           live_pings: live.pings, live_open_ms: Date.now() - since - opened };
}

// SIGTERM to the gateway while `idler` sits and `busy` has a response of
// `tokens` running; returns the running one's response.done.
async function terminate(tokens) {
  const idler = connect();
  const busy = connect();
  await idler.next("session.created");
  await busy.next("session.created");
  respond(busy, tokens);
  await busy.next("response.output_text.delta");
  process.kill(Number(gatewayPid), "SIGTERM");
  const signalled = Date.now() - since;
  const idleClose = await idler.close();
  const busyClose = await busy.close();
  for (const closed of [idleClose, busyClose]) {
    if (closed.code !== 1001 || closed.reason !== "the gateway is shutting down") {
      fail(`closed ${closed.code} '${closed.reason}'`);
    }
  }
  const done = busy.events.find((e) => e.type === "response.done");
  if (!done) fail("closed before response.done");
  if (busy.events.indexOf(done) !== busyClose.after - 1) fail("events after response.done");
  if (idleClose.after !== idler.events.length) fail("idle session: events after its close");
  return { done, idle_closed_ms: idleClose.ms - signalled, busy_closed_ms: busyClose.ms - signalled };
}

async function drain() {
  const { done, idle_closed_ms, busy_closed_ms } = await terminate(30);
  if (done.response.status !== "completed" && done.response.status !== "incomplete") {
    fail(`status ${done.response.status}`);
  }
  if (idle_closed_ms > busy_closed_ms) fail("the idle session waited for the busy one");
  return { status: done.response.status, idle_closed_ms, busy_closed_ms };
}

async function deadline() {
  const { done, busy_closed_ms } = await terminate(1000);
  if (done.response.status !== "cancelled") fail(`status ${done.response.status}`);
  return { status: done.response.status, busy_closed_ms };
}

const checks = { limit, idle, drain, deadline };
if (!checks[check]) fail(`unknown check '${check}'`);
const result = await checks[check]();
console.log(JSON.stringify({ check, ok: true, ...result }));
process.exit(0);
