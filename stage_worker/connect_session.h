// ConnectSession: one orchestrator's Connect stream on a stage worker.
//
// A ConnectSession owns the stream's outgoing events (a StreamWriter: one write in
// flight, the rest queued and step outputs merged meanwhile, a client that
// stops reading cut off; a later step's load, cache reports included, merged
// into an earlier one's as CacheDelta says), the set of the
// session's live request ids, and the fence that keeps an Abort from overtaking
// commands sent before it.
// Thread-safe: gRPC threads add commands and aborts, the busy-loop thread sends
// step outputs.
//
// Lock order: ConnectSession::mu_ may be held while pushing into the EngineCore's input
// queue (so a fenced abort is queued right behind the command it waits for); no
// other call goes out while mu_ is held.
#ifndef OMNISTAGE_STAGE_WORKER_CONNECT_SESSION_H_
#define OMNISTAGE_STAGE_WORKER_CONNECT_SESSION_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/log.h"
#include "common/stream_writer.h"
#include "protos/stage_worker.pb.h"
#include "stage_worker/engine_core.h"

namespace omnistage {

// The stream a ConnectSession writes to; implemented by the gRPC reactor. The ConnectSession
// calls BeginWrite() with at most one write outstanding and FinishStream() once,
// after the last write completed, never while holding its own lock;
// CancelStream() breaks the stream at once (the client is not reading): the write
// in flight fails, and the stream's end closes the session.
using EventTransport = StreamWriter<v1::WorkerEvent>::Transport;

class ConnectSession {
 public:
  // Events queued for a client that does not read; past this the stream is
  // cancelled, which closes the session and aborts its requests, rather than
  // letting memory grow without bound.
  static constexpr size_t kMaxQueuedEvents = 1 << 16;
  // Step outputs that queue behind a write in flight are merged into one event
  // of at most this many bytes (a larger one goes alone; clients accept 64 MiB).
  static constexpr size_t kMaxMergedEventBytes = 4 << 20;
  // Backpressure: past this many bytes queued for the client, the busy loop
  // waits before its next step (WaitForReader) rather than let the backlog,
  // and every new request's first output behind it, grow.
  static constexpr int64_t kBackpressureBytes = 2 << 20;
  // A reader that takes no write for this long is not waited for in that step
  // (a stuck client slows the others' steps by at most this much).
  static constexpr absl::Duration kReaderProgressTimeout = absl::Milliseconds(20);

  // `first_seq` is the seq of the session's Hello: later commands must exceed it.
  // `peer`: the identity of the client that opened it (its certificate's name;
  // "" over plaintext). `wants_cache_events`: its Hello asked for the engine's
  // prefix-cache changes, and the engine has a cache.
  ConnectSession(uint64_t number, std::string peer, EventTransport* transport, uint64_t first_seq,
                 bool wants_cache_events = false);

  // Constant after construction. The id is "<number>-<128 random bits>": an
  // Abort must name it whole, so it cannot be guessed from the number. Log
  // lines name the number only.
  uint64_t number() const { return number_; }
  const std::string& id() const { return id_; }
  const std::string& peer() const { return peer_; }
  bool wants_cache_events() const { return wants_cache_events_; }

  // Queues `event` for the client. Until Open() it is held, so that Ready goes
  // first whatever reaches a registered session meanwhile (a drain, a stall, a
  // load broadcast, an Abort's end). Dropped once the session is ending.
  void Send(v1::WorkerEvent event);
  // Writes `first` (the session's Ready; none for a session refused as it
  // opened), then what Send() and End() held, in order; from then on they go
  // straight to the stream. Called once.
  void Open(std::optional<v1::WorkerEvent> first);
  // Called by the transport when the previous BeginWrite() completed.
  void OnWriteDone(bool ok) { writer_.OnWriteDone(ok); }
  // Blocks while more than kBackpressureBytes wait for the client, as long as
  // the client keeps taking writes (one at least every kReaderProgressTimeout),
  // until `deadline`. Returns how long it waited. Busy-loop thread.
  absl::Duration WaitForReader(absl::Time deadline);
  // Finishes the stream with `status` once the queued events are written (held,
  // like Send(), until Open()). Idempotent: the first status wins.
  void End(const absl::Status& status);

  // Request bookkeeping. Marks `request_id` live, with the trace id its log
  // lines carry; false if it already is.
  bool AddLive(const std::string& request_id, std::string trace_id = "");
  // The engine took live request `request_id` (on the busy-loop thread, right
  // after its Add was applied).
  void MarkTaken(const std::string& request_id);
  // Forgets a finished request; returns its trace id.
  std::string EraseLive(const std::string& request_id);
  // Of `ids`, erases and returns the live ones the engine has taken (in the
  // order given). Called right after the engine applied an abort of `ids`: a
  // request whose Add comes after that abort in the loop's queue was not
  // stopped by it, and goes on.
  std::vector<std::string> TakeLive(const std::vector<std::string>& ids);
  // The live ids now, in no particular order.
  std::vector<std::string> LiveIds() const;
  // The client acknowledged a drain: it adds nothing more.
  void MarkDrainAcked();
  // Acknowledged, or closed: nothing more will be added on this session.
  bool done_adding() const;
  // Closes the session for new requests and returns every live id (then empty).
  // Aborts still waiting for their fence are moved to `released`. Returns nothing
  // after the first call.
  std::vector<std::string> Close(std::vector<CoreMessage>* released);
  bool closed() const;
  size_t live_count() const;
  // The worker load last sent on this session (WorkerLoad.requests; -1: none
  // yet). Busy-loop thread only.
  int reported_load() const { return reported_load_; }
  void set_reported_load(int load) { reported_load_ = load; }

  // Queues messages for the busy loop; runs under the session lock.
  using Submit = std::function<void(std::vector<CoreMessage>)>;

  // Command ordering. `seq` must exceed the last accepted seq. On success
  // `command` (if any) and every abort fenced on a seq up to `seq` are submitted
  // together, in that order, so the loop applies them in one drain.
  absl::Status Sequence(uint64_t seq, std::optional<CoreMessage> command, const Submit& submit);
  // Submits `abort` now if command `after_seq` was already sequenced (or the session
  // is closed), else together with that command.
  void Fence(uint64_t after_seq, CoreMessage abort, const Submit& submit);

 private:
  const uint64_t number_;
  const std::string peer_;
  const std::string id_;
  const bool wants_cache_events_;
  // Bytes queued for the client, and writes taken from the queue so far.
  absl::Mutex queue_mu_;
  int64_t queued_bytes_ ABSL_GUARDED_BY(queue_mu_) = 0;
  uint64_t writes_taken_ ABSL_GUARDED_BY(queue_mu_) = 0;

  StreamWriter<v1::WorkerEvent> writer_;
  int reported_load_ = -1;

  // What was sent before Open(); once open_ is set, nothing is held.
  std::atomic<bool> open_{false};
  absl::Mutex held_mu_;
  std::vector<v1::WorkerEvent> held_ ABSL_GUARDED_BY(held_mu_);
  std::optional<absl::Status> held_end_ ABSL_GUARDED_BY(held_mu_);

  mutable absl::Mutex mu_;
  // A live request: the trace id its log lines carry, and whether the engine
  // has taken it (its Add was applied).
  struct Live {
    std::string trace_id;
    bool taken = false;
  };
  absl::flat_hash_map<std::string, Live> live_ ABSL_GUARDED_BY(mu_);
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  bool drain_acked_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t last_seq_ ABSL_GUARDED_BY(mu_) = 0;
  // Aborts waiting for a command: after_seq -> messages, in arrival order.
  std::multimap<uint64_t, CoreMessage> fenced_ ABSL_GUARDED_BY(mu_);
};

// The engine's id for a session's request: "<session number>/<request id>".
std::string EngineRequestId(uint64_t session, const std::string& request_id);
// Splits an engine id back; false if it is not one.
bool ParseEngineRequestId(const std::string& engine_id, uint64_t* session, std::string* request_id);

// A step-less StepOutputs event ending each of `ids` with `reason`, the error
// saying `why`: how a session hears that its requests were stopped by anything
// other than their engine (every request ends on its session exactly once).
v1::WorkerEvent FinishedEvent(const std::vector<std::string>& ids, v1::FinishReason reason,
                              const absl::Status& why);

// What a line about `session` (or request `request_id` on it, traced by
// `trace_id`) carries, within its worker's context `worker`.
LogContext SessionContext(const LogContext& worker, const ConnectSession& session,
                          const std::string& request_id = "", const std::string& trace_id = "");

}  // namespace omnistage

#endif  // OMNISTAGE_STAGE_WORKER_CONNECT_SESSION_H_
