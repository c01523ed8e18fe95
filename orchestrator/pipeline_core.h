// PipelineCore: the orchestrator's request lifecycle, owned by one event loop.
//
// It holds one StagePool per stage and the table of in-flight requests, and does
// everything that touches them: admission and validation of Generate, routing a
// request stage to stage (on_finish or streaming hand-off), streaming final-stage
// outputs to the client, the two-phase Abort, client cancellation, dead replicas,
// idle timeouts, status and utility fan-out, and draining. Every method must be
// called on the loop's thread (the gRPC adapter posts to it); ReplicaListener
// calls arrive there too. Invariants: every admitted request gets exactly one
// terminal response; no binding outlives its request.
#ifndef OMNISTAGE_ORCHESTRATOR_PIPELINE_CORE_H_
#define OMNISTAGE_ORCHESTRATOR_PIPELINE_CORE_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/event_loop.h"
#include "orchestrator/pipeline_config.h"
#include "orchestrator/replica_client.h"
#include "orchestrator/response_sink.h"
#include "orchestrator/stage_pool.h"
#include "protos/orchestrator.pb.h"

namespace omnistage {

class PipelineCore : public ReplicaListener {
 public:
  static constexpr size_t kMaxRequestIdBytes = 128;
  static constexpr int kMaxAbortIds = 10000;

  // `replicas[s][r]` is replica r of stage s (not owned; they must outlive the
  // core). Replicas start dead until their OnReplicaReady. `loop` runs timers.
  PipelineCore(PipelineConfig config, std::vector<std::vector<ReplicaClient*>> replicas,
               EventLoop* loop);
  ~PipelineCore() override;

  // Starts a request; its responses go to `sink`. Errors before it starts go to
  // sink->Fail(): INVALID_ARGUMENT, ALREADY_EXISTS, UNAVAILABLE, RESOURCE_EXHAUSTED.
  void Generate(v1::GenerateRequest request, std::shared_ptr<ResponseSink> sink);
  // The client of `request_id` went away (cancel, disconnect, deadline): abort it
  // everywhere. Only acts if the request still belongs to `sink`.
  void Cancel(const std::string& request_id, const ResponseSink* sink);
  // Two-phase abort of many requests, one worker Abort per replica in total.
  void Abort(const v1::AbortRequest& request,
             std::function<void(absl::StatusOr<v1::AbortResponse>)> done);
  v1::PipelineStatus Status() const;
  // For status: where replica `replica` of `stage` listens.
  void set_replica_address(int stage, int replica, std::string address) {
    replica_info_[stage][replica].address = std::move(address);
  }
  void CallStageUtility(const v1::StageUtilityRequest& request,
                        std::function<void(absl::StatusOr<v1::StageUtilityResponse>)> done);
  // Stops admitting; `done` runs once no request is in flight. Requests still in
  // flight at `deadline` are aborted.
  void Drain(absl::Time deadline, std::function<void()> done);

  size_t in_flight() const { return requests_.size(); }
  const StagePool& pool(int stage) const { return *pools_[stage]; }

  // ReplicaListener.
  void OnReplicaReady(int stage, int replica, const v1::Ready& ready) override;
  void OnStepOutputs(int stage, int replica, v1::StepOutputs outputs) override;
  void OnCommandRejected(int stage, int replica, const v1::CommandRejected& rejected) override;
  void OnReplicaDown(int stage, int replica, const absl::Status& reason) override;

 private:
  struct Request;
  struct ReplicaInfo {
    std::string address;
    std::string instance_id;
    int capacity = 0;
    std::string last_error;
  };

  absl::Status Validate(const v1::GenerateRequest& request) const;
  v1::StageParameters ParamsFor(const v1::GenerateRequest& request, int stage) const;
  Request* Find(const std::string& id);

  // Routing.
  // Picks a replica of `stage` and sends the request there.
  absl::Status StartStage(Request& request, int stage, std::vector<v1::Payload> input,
                          bool complete);
  // May end the request (and so destroy `request`).
  void HandleOutput(Request& request, int stage, int replica, v1::RequestOutput output);
  // Feeds `output` of `stage` to the next stage, per its input mode.
  absl::Status HandOff(Request& request, int stage, v1::RequestOutput& output);
  void MaybeComplete(Request& request);

  // Endings: each sends the one terminal response and forgets the request.
  void Complete(Request& request, v1::FinishReason reason);
  // Fails `ids` with `error`, then aborts whatever they still run anywhere, one
  // worker call per replica.
  void FailRequests(const std::vector<std::string>& ids, const v1::Error& error);
  // Aborts `ids` on every stage where they are bound; retries failures a few
  // times, then gives the bindings up. For requests that already ended.
  void AbortLeftovers(std::vector<std::string> ids, int attempt);
  void Forget(const std::string& id);

  // Phase 1 of an abort: freezes the request; false if it is not in flight.
  bool BeginAbort(const std::string& id);
  // Phase 2: aborts `ids` on the stages from `stage` on, one stage after another;
  // `done` gets the first error, or OK once every stage confirmed.
  void AbortStages(std::shared_ptr<std::vector<std::string>> ids, size_t stage,
                   std::function<void(absl::Status)> done);
  // Phase 3: ends the frozen requests with a terminal ABORT carrying their partial
  // output; returns the ids it ended.
  std::vector<std::string> CommitAbort(const std::vector<std::string>& ids);
  // A failed phase 2: unfreezes the requests and replays what arrived meanwhile.
  void CancelAbort(const std::vector<std::string>& ids);
  // The cancelled-client path: aborts, retrying with backoff, then gives up
  // with an error terminal.
  void RetryCancel(const std::string& id, int attempt);

  void ArmIdleTimer(Request& request);
  void OnIdleTimer(const std::string& id);
  void CheckDrained();

  v1::Error StageError(absl::StatusCode code, int stage, int replica, const std::string& what) const;

  const PipelineConfig config_;
  EventLoop* const loop_;
  std::vector<std::shared_ptr<StagePool>> pools_;
  std::vector<std::vector<ReplicaInfo>> replica_info_;
  absl::flat_hash_map<std::string, std::unique_ptr<Request>> requests_;
  uint64_t next_generated_id_ = 1;
  bool accepting_ = true;
  std::function<void()> on_drained_;
  // Guards timers and callbacks that may fire after destruction.
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace omnistage

#endif  // OMNISTAGE_ORCHESTRATOR_PIPELINE_CORE_H_
