// The orchestrator's in-flight requests: what each one asked for, how far each
// stage got, what it streamed to its client, and whether an abort holds it.
//
// RequestTable owns them by id. Ending a request goes through Finish(), which
// sends its one terminal response and removes it; a second terminal for the same
// request is a broken invariant. Not thread-safe: owned by the event loop.
#ifndef OMNISTAGE_ORCHESTRATOR_CORE_REQUEST_TABLE_H_
#define OMNISTAGE_ORCHESTRATOR_CORE_REQUEST_TABLE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/time/time.h"
#include "common/log.h"
#include "common/scheduler.h"
#include "common/tracing/span.h"
#include "orchestrator/core/finished_requests.h"
#include "orchestrator/core/latency_predictor.h"
#include "orchestrator/core/replay.h"
#include "orchestrator/core/response_sink.h"
#include "protos/common.pb.h"
#include "protos/orchestrator.pb.h"
#include "protos/stage_worker.pb.h"

namespace omnistage {

// One stage's part of an in-flight request.
struct StageProgress {
  bool started = false;
  bool finished = false;
  // Where it runs, once started, and since when.
  int replica = -1;
  absl::Time sent_at;
  v1::FinishReason reason = v1::FINISH_REASON_UNSPECIFIED;
  // on_finish hand-off: the previous stage's output so far.
  std::vector<v1::Payload> pending_input;
  // Its output so far, in its kind's units (stage_audio.h).
  double produced = 0;
  // For the latency predictor (objective_planner.h): the replica and the
  // features it started with, its lead there as predicted then (-1:
  // unknown), and when its first output and its end came.
  int lead_replica = -1;
  LeadFeatures lead_features;
  double predicted_first_output = -1;
  double predicted_done = -1;
  absl::Time first_output_at = absl::InfiniteFuture();
  absl::Time done_at = absl::InfiniteFuture();
};

// What the latency predictor said of a request at admission
// (objective_planner.h), and what it learned of its wait.
struct RequestForecast {
  // Its prompt's size, in thousands of bytes.
  double prompt_kbytes = 0;
  // The requests in the admission queue due to leave before it (its
  // priority or higher) when it joined them; -1: it did not wait.
  int ahead = -1;
  // Its wait in the admission queue: estimated from the requests running
  // on stage 0 (-1: none), predicted (-1: unknown) and actual (-1: it has
  // not left yet).
  double wait_estimate = -1;
  double wait = -1;
  double waited = -1;
  // Seconds from admission to its first output and first audio; 0: unknown.
  double first_output = 0;
  double first_audio = 0;
};

// A worker output that arrived while an abort of its request was running.
struct DeferredOutput {
  int stage = 0;
  int replica = 0;
  v1::RequestOutput output;
};

// The client's side of a GenerateDuplex request: its input streams in
// (streamed_input.h).
struct InputStream {
  // More may come: no message with `last`, and no half-close, yet.
  bool open = true;
  // What came so far (payload bytes), and when the last message did.
  int64_t bytes = 0;
  absl::Time last_at;
  Scheduler::TimerId idle_timer = 0;
  // Input that came before stage 0 started (the request waits in the
  // admission queue): it goes with the AddRequest.
  std::vector<v1::Payload> held;
};

struct InFlightRequest {
  std::string id;
  std::shared_ptr<ResponseSink> sink;
  // The client's own sink, under `sink`'s decorators: what a cancellation names.
  const ResponseSink* owner = nullptr;
  // The authenticated identity that started it ("" without authentication):
  // only it may Abort the request.
  std::string caller;
  // The client's W3C traceparent (passed to every stage) and its trace id
  // (on every log line about the request); empty when it sent none.
  std::string traceparent;
  std::string tracestate;
  std::string trace_id;
  // Since its admission: what its client got, for its record when it ends
  // (finished_requests.h).
  RequestAccount account;
  // The playback deadline its stages last heard (deadline_relay.h);
  // InfinitePast: none yet.
  absl::Time deadline_sent = absl::InfinitePast();
  // GenerateRequest.session_key: its stages prefer the replicas of its
  // session's last request (docs/routing.md). Empty: none.
  std::string session_key;
  // Per stage: the parameters (defaults merged), whether its output streams to
  // the client, and its progress.
  std::vector<v1::StageParameters> params;
  std::vector<bool> to_client;
  std::vector<StageProgress> stages;
  // A final-output audio stage streams to its client.
  bool wants_audio = false;
  // Its latency objectives (latency_objectives.h), and what the latency
  // predictor said of it.
  v1::LatencyObjectives objectives;
  RequestForecast forecast;
  // The last stage this request needs.
  int last_stage = 0;
  // What the client-facing stages produced, for an abort's partial output.
  std::vector<std::string> partial_text;
  std::vector<std::vector<int32_t>> partial_tokens;
  // The two-phase aborts running for it (a client may retry an Abort still in
  // flight); while non-zero its outputs wait in `deferred`, replayed once the
  // last of them failed. The first to succeed ends the request.
  int aborting = 0;
  std::vector<DeferredOutput> deferred;
  // An abort of this orchestrator's was sent for it. A stop a worker reports
  // afterwards is that abort's doing, even when its answer never came (the
  // call timed out, the worker applied it later): the request ends ABORTED.
  bool abort_asked = false;
  absl::Time last_activity;
  Scheduler::TimerId idle_timer = 0;
  // Work that can wait (GenerateRequest.batch): it starts only within the
  // share of stage 0 that limits.batch_reserve leaves to it.
  bool batch = false;
  // While it waits in the admission queue (start_queue.h; set through
  // RequestTable::SetQueued): since when, its prompt (stage 0's input once it
  // leaves), and the timer that ends a wait past limits.max_queue_ms.
  bool queued = false;
  int priority = 0;
  int weight = 1;
  absl::Time queued_at;
  std::string queued_prompt;
  Scheduler::TimerId queue_timer = 0;
  // What failover keeps to resume it on another replica (replay.h); null when
  // no stage it runs on fails over, or it asked not to.
  std::unique_ptr<FailoverState> failover;
  // Set for a GenerateDuplex request: its streamed input.
  std::unique_ptr<InputStream> input;
  // Its spans while they run (request_tracing.h): the call's, the admission
  // queue's, and per stage the one whose context its worker gets. Not
  // started while tracing is off.
  Span span;
  Span queue_span;
  struct StageSpan {
    Span span;
    bool output = false;  // Its first output came.
  };
  std::vector<StageSpan> stage_spans;
};

// The traceparent stage `stage`'s worker gets for `r`: its stage span's
// context while one runs, else the client's (possibly empty).
inline std::string TraceparentFor(const InFlightRequest& r, int stage) {
  if (stage >= 0 && stage < static_cast<int>(r.stage_spans.size()) &&
      r.stage_spans[stage].span.started()) {
    return r.stage_spans[stage].span.context().Traceparent();
  }
  return r.traceparent;
}

// What log lines about `r` carry (its stage and replica: -1 when none).
inline LogContext ContextOf(const InFlightRequest& r, int stage = -1, int replica = -1) {
  return LogContext{r.id, stage, replica, r.trace_id};
}

class RequestTable {
 public:
  // `scheduler` cancels a removed request's idle timer.
  explicit RequestTable(Scheduler* scheduler) : scheduler_(scheduler) {}

  InFlightRequest* Find(const std::string& id) const;
  // Takes `request` in; its id must not be in flight (a broken invariant: in
  // an optimized build the new request fails INTERNAL and nullptr is returned;
  // the one in flight goes on).
  InFlightRequest* Add(std::unique_ptr<InFlightRequest> request);
  // Sends `terminal` as request `id`'s one terminal response and removes it. The
  // request must be in flight: a second terminal is a broken invariant.
  void Finish(const std::string& id, v1::Terminal terminal);
  // Removes a request that never started (its call fails instead).
  void Remove(const std::string& id);

  size_t size() const { return requests_.size(); }
  // Requests in flight that `caller` started.
  int InFlightOf(const std::string& caller) const;
  // `r` enters (true) or leaves the admission queue.
  void SetQueued(InFlightRequest& r, bool queued);
  // Requests in flight, not queued, that want audio (audio_streams.h).
  int running_audio() const { return running_audio_; }
  bool empty() const { return requests_.empty(); }
  std::vector<std::string> Ids() const;
  // Calls `visit` with every request in flight (it must not add or remove any).
  void ForEach(const std::function<void(const InFlightRequest&)>& visit) const;

 private:
  // Takes `request` off per_caller_ and cancels its timers (it is leaving).
  void Forget(const InFlightRequest& request);

  Scheduler* const scheduler_;
  absl::flat_hash_map<std::string, std::unique_ptr<InFlightRequest>> requests_;
  // Requests in flight per caller (callers with none are left out).
  absl::flat_hash_map<std::string, int> per_caller_;
  int running_audio_ = 0;
};

}  // namespace omnistage

#endif  // OMNISTAGE_ORCHESTRATOR_CORE_REQUEST_TABLE_H_
