// PipelineCore: the orchestrator's request lifecycle, owned by one event loop.
//
// It admits Generate requests (queueing them: pipeline_core_queue.cc), routes
// each one stage to stage (on_finish or streaming hand-off), streams the final
// stages' outputs to the client, ends every request exactly once and fails
// requests that go idle (pipeline_core_endings.cc), reacts to replicas (ready,
// down, rejections: pipeline_core_replicas.cc), resumes requests a replica lost
// on a stage with failover (pipeline_core_failover.cc), and drains. It
// delegates to one part per idea:
//   RequestTable        the in-flight requests (request_table.h);
//   StagePool           per stage: bindings and every call to its replicas;
//   AbortCoordinator    every stop: client Abort, cancel, drain, leftovers;
//   generate_request    what a Generate request may ask, and what it becomes.
//
// Every method runs as the scheduler's task (the gRPC adapter posts there, and
// replica events arrive there; Scheduler::RunOrPost may run a task on the thread
// that posts it, which owns the loop meanwhile); a call from outside a task is a
// broken invariant.
// Invariants: every admitted request gets exactly one terminal response; a
// binding exists only for an in-flight request or one whose leftovers are being
// stopped.
#ifndef OMNISTAGE_ORCHESTRATOR_CORE_PIPELINE_CORE_H_
#define OMNISTAGE_ORCHESTRATOR_CORE_PIPELINE_CORE_H_

#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/log.h"
#include "common/metrics.h"
#include "common/scheduler.h"
#include "orchestrator/config/pipeline_config.h"
#include "orchestrator/core/abort_coordinator.h"
#include "orchestrator/core/admission_queue.h"
#include "orchestrator/core/caller.h"
#include "orchestrator/core/finished_requests.h"
#include "orchestrator/core/pipeline_metrics.h"
#include "orchestrator/core/rate_limiter.h"
#include "orchestrator/core/request_table.h"
#include "orchestrator/core/response_sink.h"
#include "orchestrator/routing/replica_client.h"
#include "orchestrator/routing/stage_demand.h"
#include "orchestrator/routing/stage_pool.h"
#include "protos/orchestrator.pb.h"

namespace omnistage {

class PipelineCore : public ReplicaListener, private AbortListener {
 public:
  // `replicas[s][r]` is replica r of stage s (not owned; they must outlive the
  // core). Replicas start dead until their OnReplicaReady. `scheduler` runs the
  // core's timers and is the thread every call must come from.
  PipelineCore(PipelineConfig config, std::vector<std::vector<ReplicaClient*>> replicas,
               Scheduler* scheduler);
  ~PipelineCore() override;

  // Starts a request; its responses go to `sink`. Errors before it starts go to
  // sink->Fail(): INVALID_ARGUMENT, PERMISSION_DENIED (a priority above the
  // caller's ceiling), ALREADY_EXISTS, UNAVAILABLE, RESOURCE_EXHAUSTED (also a
  // full admission queue). `traceparent`: the client's W3C trace context,
  // passed to every stage. `caller`: the client's authenticated identity, the
  // only one that may Abort the request ("" without authentication), with its
  // priority and weight in the admission queue.
  // With `streamed_input` (GenerateDuplex), more input for stage 0 follows
  // through AppendInput() (pipeline_core_input.cc); the prompt may be empty,
  // and stage 0's engine must take input in pieces (FAILED_PRECONDITION).
  void Generate(v1::GenerateRequest request, std::shared_ptr<ResponseSink> sink,
                std::string traceparent = "", const Caller& caller = Caller(),
                bool streamed_input = false);
  // A later message of the GenerateDuplex call whose request `request_id`
  // answers to `sink` (a request that ended, or another's, takes nothing).
  // Its input goes to stage 0 (held while the request waits in the admission
  // queue); `input.last` closes the input. Anything else ends the request
  // with INVALID_ARGUMENT, stopped on every stage: a message carrying a
  // request, a chunk over limits.max_input_chunk_bytes, input past
  // limits.max_input_bytes, a payload with no content or malformed audio,
  // input after `last`.
  void AppendInput(const std::string& request_id, const ResponseSink* sink,
                   v1::GenerateInput message);
  // The client of `request_id` went away (cancel, disconnect, deadline): abort it
  // everywhere. Only acts if the request still belongs to `sink`.
  void Cancel(const std::string& request_id, const ResponseSink* sink);
  // The client's Abort of many requests (see AbortCoordinator); worker calls end
  // by `deadline` at the latest. INVALID_ARGUMENT for more than
  // kMaxAbortIdsPerCall ids. Requests another identity started are NOT_FOUND,
  // unless `caller` may abort any (an admin).
  void Abort(const v1::AbortRequest& request, absl::Time deadline,
             std::function<void(absl::StatusOr<v1::AbortResponse>)> done,
             const Caller& caller = Caller());
  v1::PipelineStatus Status() const;
  // Calls a utility on every live replica of one stage.
  void CallStageUtility(const v1::StageUtilityRequest& request,
                        std::function<void(absl::StatusOr<v1::StageUtilityResponse>)> done);
  // Stops admitting; `done` runs once no request is in flight. Requests still in
  // flight at `deadline` are aborted.
  void Drain(absl::Time deadline, std::function<void()> done);

  // Tags the request ids this core generates (request_id.h); "" (the
  // default): untagged.
  void set_node_id(std::string node_id) { node_id_ = std::move(node_id); }
  const std::string& node_id() const { return node_id_; }
  // Whether every finished request gets an access log line (the default);
  // Status().recent is filled either way (finished_requests.h).
  void set_access_log(bool on) { finished_.set_access_log(on); }
  // True when request `id` is in flight here and `caller` may abort it (it
  // started it, or may abort any).
  bool Holds(const std::string& id, const Caller& caller) const;
  // Runs once per idle period, on the loop: at the first demand sample that
  // finds nothing in flight or queued and nothing admitted since the sample
  // before (the orchestrator gives its allocator's free memory back then).
  void set_on_idle(std::function<void()> on_idle) { on_idle_ = std::move(on_idle); }
  // For status: where replica `replica` of `stage` listens.
  void set_replica_address(int stage, int replica, std::string address);
  size_t in_flight() const { return table_.size(); }
  // Should be sent requests: accepting (not draining) and every stage has a
  // live replica.
  bool Ready() const;
  const StagePool& pool(int stage) const { return *pools_[stage]; }
  const PipelineConfig& config() const { return config_; }
  // The orchestrator's metrics (the registry /metrics serves).
  MetricsRegistry& metrics_registry() { return metrics_registry_; }
  PipelineMetrics& metrics() { return metrics_; }
  // Sets the gauges of loop-owned state (in flight, per replica up and bound,
  // the stages' autoscaling signals) for a scrape.
  void SnapshotMetrics();
  // For membership (replicas that join and leave at run time).
  const std::shared_ptr<StagePool>& shared_pool(int stage) { return pools_[stage]; }

  // ReplicaListener.
  void OnReplicaReady(int stage, int replica, const v1::Ready& ready) override;
  void OnStepOutputs(int stage, int replica, v1::StepOutputs& outputs) override;
  void OnCommandRejected(int stage, int replica, const v1::CommandRejected& rejected) override;
  void OnReplicaDown(int stage, int replica, const absl::Status& reason) override;
  void OnReplicaStalled(int stage, int replica, const v1::Stalled& stalled) override;
  void OnReplicaDraining(int stage, int replica, const v1::Draining& draining) override;

 private:
  // AbortListener.
  void EndRequests(const std::vector<std::string>& ids,
                   const std::function<v1::Terminal(const InFlightRequest&)>& terminal_for) override;
  void ResumeRequest(const std::string& id) override;

  void CheckInLoop() const;
  // What log lines about `r` carry.
  static LogContext ContextOf(const InFlightRequest& r, int stage = -1, int replica = -1);
  // Admission: the id a request runs under, or why it cannot run now.
  absl::StatusOr<std::string> AdmitId(const v1::GenerateRequest& request,
                                      const std::string& caller, bool streamed_input);
  // Streamed input (pipeline_core_input.cc). OK when stage 0 takes input in
  // pieces: none of its live replicas says its engine does not.
  absl::Status CheckTakesStreamedInput() const;
  // Watches the pause since `r`'s last input message.
  void ArmInputTimer(InFlightRequest& r);
  void OnInputIdle(const std::string& id);
  // Ends `r` for input that breaks the contract or the limits: `refusal`,
  // whose field (common/field_error.h) says which, also to the metrics.
  void FailInput(InFlightRequest& r, const absl::Status& refusal);

  // The admission queue (pipeline_core_queue.cc). Whether a new request waits:
  // the queue is on, and others wait or stage 0 has no free slot (but a live
  // replica: with none, the request fails at once as it always did).
  bool MustQueue() const;
  // Queues `r` with its prompt; false when the queue refused it (its call has
  // failed and it is gone).
  bool Enqueue(InFlightRequest& r, std::string prompt, int priority, int weight);
  // Sends queued requests to stage 0 while it has free slots; one being
  // aborted is taken out without being sent (parked).
  void PumpQueue();
  // A parked request whose abort did not end it goes back into the queue.
  void RequeueIfParked(InFlightRequest& r);
  void OnQueueTimer(const std::string& id);
  // Ends every queued request with `error` (a drain).
  void RefuseQueued(const v1::Error& error);
  // Starts `r` on stage 0 with `prompt`; false when it could not (and failed).
  std::optional<v1::Error> StartFirstStage(InFlightRequest& r, std::string prompt);

  // Routing. Sends `input` to a replica of `stage`; the error when it could not.
  std::optional<v1::Error> StartStage(InFlightRequest& request, int stage,
                                      std::vector<v1::Payload> input, bool complete);
  // May end the request (and so destroy `request`).
  void HandleOutput(InFlightRequest& request, int stage, int replica, v1::RequestOutput& output);
  // Feeds `output` of `stage` to the next stage, per its input mode; may end the
  // request.
  void HandOff(InFlightRequest& request, int stage, v1::RequestOutput& output);
  // Streams `output`'s payloads to the replica `stage` already runs the request
  // on; the error when that replica refused them. May end the request.
  std::optional<v1::Error> SendMoreInput(
      InFlightRequest& request, int stage,
      const google::protobuf::RepeatedPtrField<v1::Payload>& payloads, bool last);
  void MaybeComplete(InFlightRequest& request);

  // Failover (pipeline_core_failover.cc, docs/reliability.md). Whether `r`
  // fails over on `stage` (the stage has it on, the request did not opt out,
  // and what it keeps stayed within limits.max_replay_bytes).
  bool FailsOver(const InFlightRequest& r, int stage) const;
  // Keeps `payload`, handed to `stage` as input, to resume the stage with.
  void KeepInput(InFlightRequest& r, int stage, const v1::Payload& payload, bool complete);
  // Counts `bytes` more kept for `r` (at `stage`); past limits.max_replay_bytes
  // everything kept is dropped and `r` fails over no more.
  void ChargeReplayBytes(InFlightRequest& r, int stage, int64_t bytes);
  // Before anyone sees `output` of `stage`: drops what a replayed run repeats
  // and counts what goes on. False when the request failed (a replay that
  // differs from what was delivered).
  bool PassOnOutput(InFlightRequest& r, int stage, int replica, v1::RequestOutput& output);
  // Replica `replica` of `stage` lost `ids` (their bindings are gone): each
  // fails over where it can and fails with `error` otherwise.
  void LoseRequests(int stage, int replica, const std::vector<std::string>& ids,
                    const v1::Error& error);
  // Resumes `r` on another replica of `stage`; the error to fail it with when
  // it cannot. Deferred (nullopt) while an abort holds the request.
  std::optional<v1::Error> FailOver(InFlightRequest& r, int stage, int lost_replica,
                                    const v1::Error& error);
  // After an abort of `r` failed: resumes the stages it lost meanwhile; may
  // end the request.
  void ResumeLostStages(InFlightRequest& r);

  // Endings.
  // The record of `r` ending with `terminal` now: the stages it ran on
  // (replica and instance), what its client got, how long it took.
  v1::FinishedRequest RecordOf(const InFlightRequest& r, const v1::Terminal& terminal) const;
  void FailRequests(const std::vector<std::string>& ids, const v1::Error& error);
  // A replica went away: its bound requests fail over or fail, naming it.
  void HandleReplicaLoss(int stage, const ReplicaLoss& loss);
  // What happens to a lost replica's requests, for its log line.
  const char* LossVerb(int stage) const;
  void ArmIdleTimer(InFlightRequest& request);
  void OnIdleTimer(const std::string& id);
  void CheckDrained();
  // Samples every stage for its autoscaling signal (stage_demand.h), then
  // again after scaling.sample_interval.
  void SampleDemand();
  void ArmDemandTimer();

  v1::Error StageErrorAt(absl::StatusCode code, int stage, int replica,
                         absl::string_view what) const;

  const PipelineConfig config_;
  Scheduler* const scheduler_;
  MetricsRegistry metrics_registry_;
  PipelineMetrics metrics_;
  // The most recent finished requests, and their access lines.
  FinishedRequests finished_;
  std::vector<std::shared_ptr<StagePool>> pools_;
  RequestTable table_;
  AbortCoordinator abort_;
  bool accepting_ = true;
  std::string node_id_;
  // The first stage with failover on (INT_MAX: none); a request that ends
  // before it keeps nothing to fail over with.
  int first_failover_stage_ = std::numeric_limits<int>::max();
  AdmissionQueue queue_;
  RateLimiter rate_limiter_;
  bool pumping_ = false;
  // While a batch of worker outputs is handled (OnStepOutputs): nothing
  // leaves the queue until its end.
  bool holding_queue_ = false;
  std::function<void()> on_drained_;
  Scheduler::TimerId drain_timer_ = 0;
  // Requests admitted since start (queued ones too), and what the stages'
  // autoscaling signals make of them.
  uint64_t arrivals_ = 0;
  StageDemand demand_;
  Scheduler::TimerId demand_timer_ = 0;
  // arrivals_ at the last sample; on_idle_ ran since the last arrival.
  uint64_t arrivals_sampled_ = 0;
  bool idle_heard_ = false;
  std::function<void()> on_idle_;
  // Expires with the core, so late timers do nothing.
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace omnistage

#endif  // OMNISTAGE_ORCHESTRATOR_CORE_PIPELINE_CORE_H_
