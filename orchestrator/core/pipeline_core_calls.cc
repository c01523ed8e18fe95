// PipelineCore's answers to its clients' other calls (pipeline_core.h): a
// client gone away, Abort, status, stage utilities, and the drain. Admission and
// routing are in pipeline_core.cc, endings in pipeline_core_endings.cc, the
// replicas' side in pipeline_core_replicas.cc.
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/error_proto.h"
#include "common/invariant.h"
#include "common/log.h"
#include "orchestrator/core/pipeline_core.h"
#include "orchestrator/core/stage_admin.h"

namespace omnistage {

// ---- Client calls ------------------------------------------------------------------

void PipelineCore::Cancel(const std::string& request_id, const ResponseSink* sink) {
  CheckInLoop();
  const InFlightRequest* r = table_.Find(request_id);
  // Goes ahead even while a client Abort of it runs: if that one fails, this one
  // still stops the work of a client that is gone.
  if (r == nullptr || r->owner != sink) return;
  metrics_.ClientCancelled();
  abort_.Cancel(request_id);
}

void PipelineCore::Abort(const v1::AbortRequest& request, absl::Time deadline,
                         std::function<void(absl::StatusOr<v1::AbortResponse>)> done,
                         const Caller& caller) {
  CheckInLoop();
  if (request.request_ids_size() > kMaxAbortIdsPerCall) {
    done(absl::InvalidArgumentError(absl::StrCat("request_ids: ", request.request_ids_size(),
                                                 " ids; the limit is ", kMaxAbortIdsPerCall)));
    return;
  }
  abort_.Abort({request.request_ids().begin(), request.request_ids().end()}, deadline,
               [this, alive = std::weak_ptr<bool>(alive_), received = scheduler_->Now(),
                done = std::move(done)](v1::AbortResponse response) {
                 if (!alive.expired()) metrics_.AbortCallDone(scheduler_->Now() - received);
                 for (const v1::AbortResult& result : response.results()) {
                   if (result.outcome() != v1::AbortResult::OUTCOME_FAILED) continue;
                   LogWarning({result.request_id(), result.error().stage_id(),
                               result.error().replica(), ""},
                              absl::StrCat("abort failed (the client may retry): ",
                                           result.error().message()));
                 }
                 done(std::move(response));
               },
               caller);
}

void PipelineCore::SnapshotMetrics() {
  CheckInLoop();
  std::vector<size_t> queued(kMaxPriority + 1);
  for (int p = 0; p <= kMaxPriority; ++p) queued[p] = queue_.CountAt(p);
  metrics_.Snapshot(table_.size(), pools_, queued);
  metrics_.Scaling(demand_);
}

void PipelineCore::SampleDemand() {
  CheckInLoop();
  std::vector<StageLoad> loads;
  for (const auto& pool : pools_) loads.push_back(pool->Load());
  // What waits for stage 0 waits in the admission queue.
  if (!loads.empty()) loads[0].waiting += static_cast<int>(queue_.size());
  demand_.Sample(scheduler_->Now(), arrivals_, loads);
  demand_timer_ = 0;
  // Idle, with nothing left to decay (or draining): sampling pauses until
  // the next request.
  const bool idle = table_.empty() && queue_.size() == 0;
  if (!(idle && (demand_.Quiet() || !accepting_))) ArmDemandTimer();
  // Idle since the sample before: once per idle period.
  const bool settled = idle && arrivals_ == arrivals_sampled_;
  arrivals_sampled_ = arrivals_;
  if (!settled) {
    idle_heard_ = false;
  } else if (!idle_heard_) {
    idle_heard_ = true;
    if (on_idle_) on_idle_();
  }
}

void PipelineCore::ArmDemandTimer() {
  demand_timer_ = scheduler_->PostAfter(config_.scaling.sample_interval,
                                        [this, alive = std::weak_ptr<bool>(alive_)] {
                                          if (!alive.expired()) SampleDemand();
                                        });
}

v1::PipelineStatus PipelineCore::Status() const {
  CheckInLoop();
  v1::PipelineStatus status;
  status.set_in_flight_requests(static_cast<int>(table_.size()));
  status.set_accepting(accepting_);
  status.set_invariant_violations(InvariantViolations());
  DescribeStages(config_, pools_, scheduler_->Now(), &status);
  for (v1::StageStatus& stage : *status.mutable_stages()) {
    *stage.mutable_scaling() = demand_.Signal(stage.stage_id());
  }
  status.set_node_id(node_id_);
  for (const QueueLevel& level : queue_.Levels()) {
    v1::QueuedRequests* queued = status.add_queued();
    queued->set_priority(level.priority);
    queued->set_identity(level.identity);
    queued->set_waiting(static_cast<int>(level.waiting));
  }
  finished_.AppendTo(status.mutable_recent());
  return status;
}

void PipelineCore::CallStageUtility(
    const v1::StageUtilityRequest& request,
    std::function<void(absl::StatusOr<v1::StageUtilityResponse>)> done) {
  CheckInLoop();
  omnistage::CallStageUtility(config_, pools_, request, std::move(done));
}

// ---- Draining -----------------------------------------------------------------------

void PipelineCore::Drain(absl::Time deadline, std::function<void()> done) {
  CheckInLoop();
  accepting_ = false;
  on_drained_ = std::move(done);
  RefuseQueued(ErrorProto(absl::UnavailableError(
      "the orchestrator is draining; this request waited in its admission queue and never "
      "started: try another one")));
  LogInfo(absl::StrCat("draining: admitting no more requests; ", table_.size(),
                       " in flight get until ", absl::FormatTime(deadline), ", then are aborted"));
  drain_timer_ = scheduler_->PostAt(deadline, [this, alive = std::weak_ptr<bool>(alive_)] {
    if (alive.expired()) return;
    drain_timer_ = 0;
    abort_.AbortAll("the orchestrator is shutting down");
  });
  CheckDrained();
}

void PipelineCore::CheckDrained() {
  if (accepting_ || !table_.empty() || !on_drained_) return;
  scheduler_->Cancel(drain_timer_);
  drain_timer_ = 0;
  std::function<void()> done = std::move(on_drained_);
  on_drained_ = nullptr;
  LogInfo("drained: no request in flight");
  done();
}

}  // namespace omnistage
