// PipelineCore: the orchestrator's request lifecycle, owned by one event loop.
//
// It admits Generate requests, routes each one stage to stage (on_finish or
// streaming hand-off), streams the final stages' outputs to the client, ends
// every request exactly once (a terminal, its record, then its leftovers
// stopped), fails requests that go idle, reacts to replicas (ready, down,
// stalled, draining, rejections: pipeline_core_replicas.cc) and drains. It
// delegates to one part per idea:
//   RequestTable        the in-flight requests (request_table.h);
//   StagePool           per stage: bindings and every call to its replicas;
//   StartQueue          requests waiting for a slot on stage 0;
//   Failover            what a request keeps to resume on another replica;
//   StreamedInput       a GenerateDuplex request's input;
//   DeadlineRelay       its listener's playback deadline, to its stages;
//   ObjectivePlanner    its latency objectives' predictions and decisions;
//   AbortCoordinator    every stop: client Abort, cancel, drain, leftovers;
//   DemandSampler       the stages' autoscaling signals, and going idle;
//   generate_request    what a Generate request may ask, and what it becomes.
//
// Every method runs as the scheduler's task (Scheduler::RunOrPost may run one
// on the thread that posts it, which owns the loop meanwhile); a call from
// outside a task is a broken invariant. Invariants: every admitted request gets
// exactly one terminal response; a binding exists only for an in-flight request
// or one whose leftovers are being stopped.
#ifndef OMNISTAGE_ORCHESTRATOR_CORE_PIPELINE_CORE_H_
#define OMNISTAGE_ORCHESTRATOR_CORE_PIPELINE_CORE_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/liveness.h"
#include "common/metrics.h"
#include "common/scheduler.h"
#include "orchestrator/config/pipeline_config.h"
#include "orchestrator/core/abort_coordinator.h"
#include "orchestrator/core/audio_streams.h"
#include "orchestrator/core/caller.h"
#include "orchestrator/core/deadline_relay.h"
#include "orchestrator/core/demand_sampler.h"
#include "orchestrator/core/failover.h"
#include "orchestrator/core/finished_requests.h"
#include "orchestrator/core/objective_metrics.h"
#include "orchestrator/core/objective_planner.h"
#include "orchestrator/core/pipeline_metrics.h"
#include "orchestrator/core/rate_limiter.h"
#include "orchestrator/core/request_table.h"
#include "orchestrator/core/request_tracing.h"
#include "orchestrator/core/response_sink.h"
#include "orchestrator/core/stage_audio.h"
#include "orchestrator/core/start_queue.h"
#include "orchestrator/core/streamed_input.h"
#include "orchestrator/routing/replica_client.h"
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
  // through AppendInput() (streamed_input.h); the prompt may be empty, and
  // stage 0's engine must take input in pieces (FAILED_PRECONDITION).
  // `tracestate`: the W3C tracestate that came with the traceparent.
  void Generate(v1::GenerateRequest request, std::shared_ptr<ResponseSink> sink,
                std::string traceparent = "", const Caller& caller = Caller(),
                bool streamed_input = false, std::string tracestate = "");
  // A later message of the GenerateDuplex call whose request `request_id`
  // answers to `sink` (a request that ended, or another's, takes nothing):
  // more input for stage 0, or the end of it (streamed_input.h).
  void AppendInput(const std::string& request_id, const ResponseSink* sink,
                   v1::GenerateInput message);
  // The client of `request_id` went away (cancel, disconnect, deadline): abort it
  // everywhere. Only acts if the request still belongs to `sink`.
  void Cancel(const std::string& request_id, const ResponseSink* sink);
  // The client's Abort of many requests (see AbortCoordinator); worker calls end
  // by `client_deadline` at the latest. INVALID_ARGUMENT for more than
  // kMaxAbortIdsPerCall ids. Requests another identity started are NOT_FOUND,
  // unless `caller` may abort any (an admin).
  void Abort(const v1::AbortRequest& request, absl::Time client_deadline,
             std::function<void(absl::StatusOr<v1::AbortResponse>)> done,
             const Caller& caller = Caller());
  v1::PipelineStatus Status() const;
  // Calls a utility on every live replica of one stage.
  void CallStageUtility(const v1::StageUtilityRequest& request,
                        std::function<void(absl::StatusOr<v1::StageUtilityResponse>)> done);
  // Stops admitting; `done` runs once no request is in flight. Requests still in
  // flight at `deadline` are aborted.
  void Drain(absl::Time deadline, std::function<void()> done);

  // Tags the ids this core generates (request_id.h); "" (default): untagged.
  void set_node_id(std::string node_id) { node_id_ = std::move(node_id); }
  const std::string& node_id() const { return node_id_; }
  // Whether every finished request gets an access log line (the default);
  // Status().recent is filled either way (finished_requests.h).
  void set_access_log(bool on) { finished_.set_access_log(on); }
  // Where requests' spans go (request_tracing.h; not owned, outlives the
  // core); null: nowhere.
  void set_tracer(const Tracer* tracer) { tracing_.set_tracer(tracer); }
  // True when request `id` is in flight here and `caller` may abort it (it
  // started it, or may abort any).
  bool Holds(const std::string& id, const Caller& caller) const;
  // Runs once per idle period, on the loop (demand_sampler.h).
  void set_on_idle(std::function<void()> on_idle) { demand_.set_on_idle(std::move(on_idle)); }
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
  void EndRequests(
      const std::vector<std::string>& ids,
      const std::function<v1::Terminal(const InFlightRequest&)>& terminal_for) override;
  void ResumeRequest(const std::string& id) override;

  void CheckInLoop() const;
  // What the collaborators use of the core.
  CoreParts Parts();
  // Admission: the id a request runs under, or why it cannot run now.
  absl::StatusOr<std::string> AdmitId(const v1::GenerateRequest& request, const Caller& caller,
                                      bool streamed_input);
  // `r`'s call fails with `error` before it started anywhere.
  void RefuseCall(InFlightRequest& r, const absl::Status& error);

  // Starts `r` on stage 0 with `prompt` (and what streamed in).
  std::optional<v1::Error> StartFirstStage(InFlightRequest& r, std::string prompt);
  // Sends `input` to a replica of `stage`; the error when it could not.
  std::optional<v1::Error> StartStage(InFlightRequest& r, int stage, std::vector<v1::Payload> input,
                                      bool complete);
  // May end the request (and so destroy `r`).
  void HandleOutput(InFlightRequest& r, int stage, int replica, v1::RequestOutput& output);
  // Feeds `output` of `stage` to the next stage, per its input mode.
  void HandOff(InFlightRequest& r, int stage, v1::RequestOutput& output);
  // Streams `payloads` to the replica running `r` on `stage`; its refusal.
  std::optional<v1::Error> SendMoreInput(
      InFlightRequest& r, int stage,
      const google::protobuf::RepeatedPtrField<v1::Payload>& payloads, bool last);
  void MaybeComplete(InFlightRequest& r);

  // Losses (docs/reliability.md). Replica `replica` of `stage` lost `ids`:
  // each fails over where it can and fails with `error` otherwise.
  void LoseRequests(int stage, int replica, const std::vector<std::string>& ids,
                    const v1::Error& error);
  // A replica went away: its bound requests fail over or fail, naming it.
  void HandleReplicaLoss(int stage, const ReplicaLoss& loss);
  // Failover::Resume, and the replicas found dead on the way lost in turn.
  std::optional<v1::Error> FailOver(InFlightRequest& r, int stage, int lost_replica,
                                    const v1::Error& error);
  // After an abort of `r` failed: resumes the stages it lost meanwhile.
  void ResumeLostStages(InFlightRequest& r);

  // Endings (pipeline_core_endings.cc).
  void FailRequests(const std::vector<std::string>& ids, const v1::Error& error);
  // The record of `r` ending with `terminal` now.
  v1::FinishedRequest RecordOf(const InFlightRequest& r, const v1::Terminal& terminal) const;
  void ArmIdleTimer(InFlightRequest& r);
  void OnIdleTimer(const std::string& id);
  void CheckDrained();
  v1::Error StageErrorAt(absl::StatusCode code, int stage, int replica,
                         absl::string_view what) const;

  const PipelineConfig config_;
  Scheduler* const scheduler_;
  MetricsRegistry metrics_registry_;
  PipelineMetrics metrics_;
  ObjectiveMetrics objective_metrics_;
  ObjectivePlanner planner_;
  RequestTracing tracing_;
  // The most recent finished requests, and their access lines.
  FinishedRequests finished_;
  std::vector<std::shared_ptr<StagePool>> pools_;
  RequestTable table_;
  AbortCoordinator abort_;
  Failover failover_;
  AudioStreams audio_;
  StageAudio stage_audio_;
  DeadlineRelay deadlines_;
  StartQueue starts_;
  StreamedInput input_;
  RateLimiter rate_limiter_;
  DemandSampler demand_;
  bool accepting_ = true;
  std::string node_id_;
  std::function<void()> on_drained_;
  Scheduler::TimerId drain_timer_ = 0;
  Liveness alive_;
};

}  // namespace omnistage

#endif  // OMNISTAGE_ORCHESTRATOR_CORE_PIPELINE_CORE_H_
