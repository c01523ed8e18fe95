// PipelineCore's side of its replicas (pipeline_core.h, ReplicaListener): a
// replica up, down, stalled, draining, or refusing a command, and what that
// does to the requests bound to it. Admission and routing are in
// pipeline_core.cc, endings in pipeline_core_endings.cc, the clients' other
// calls in pipeline_core_calls.cc, failover in pipeline_core_failover.cc.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/error_proto.h"
#include "common/log.h"
#include "orchestrator/core/pipeline_core.h"

namespace omnistage {

const char* PipelineCore::LossVerb(int stage) const {
  return config_.stages[stage].failover_max_attempts > 0 ? "resuming elsewhere (failover)"
                                                          : "failing";
}

void PipelineCore::HandleReplicaLoss(int stage, const ReplicaLoss& loss) {
  LoseRequests(stage, loss.replica, loss.evicted,
               StageErrorAt(absl::StatusCode::kUnavailable, stage, loss.replica,
                            absl::StrCat("died: ", loss.reason.message())));
}

void PipelineCore::OnReplicaReady(int stage, int replica, const v1::Ready& ready) {
  CheckInLoop();
  StagePool& pool = *pools_[stage];
  if (pool.alive(replica)) {
    if (pool.state(replica).instance_id == ready.instance_id()) {
      LogInfo({"", stage, replica, ""}, "serving again (its stalled step returned)");
      pool.ReportCache(replica, ready.load().cache());
      return;
    }
    OnReplicaDown(stage, replica,
                  absl::UnavailableError(absl::StrCat("restarted as ", ready.instance_id())));
  }
  pool.Admit(replica, ready);
  pool.ReportLoad(replica, ready.load().requests(), scheduler_->Now());
  LogInfo({"", stage, replica, ""},
          absl::StrCat("up: instance ", ready.instance_id(), " at ", pool.state(replica).address,
                       " (", pool.state(replica).origin, ", capacity ", ready.capacity(), ")"));
  if (stage == 0) PumpQueue();
}

void PipelineCore::OnReplicaDown(int stage, int replica, const absl::Status& reason) {
  CheckInLoop();
  // A reconnect attempt that fails again is no new eviction; it is logged when
  // its reason is new (the first attempt after the replica joined, or the
  // cause changed), so a replica that never comes up says why.
  if (pools_[stage]->alive(replica)) {
    metrics_.Evicted(stage, "stream_ended");
    LogWarning({"", stage, replica, ""},
               absl::StrCat("down: ", reason.message(), "; ", LossVerb(stage), " its ",
                            pools_[stage]->BoundCount(replica), " request(s)"));
  } else if (pools_[stage]->state(replica).last_error != reason.message()) {
    LogWarning({"", stage, replica, ""},
               absl::StrCat("not reachable at ", pools_[stage]->state(replica).address, ": ",
                            reason.message(), "; retrying"));
  }
  HandleReplicaLoss(stage,
                    ReplicaLoss{replica, reason, pools_[stage]->MarkDown(replica, reason)});
}

void PipelineCore::OnReplicaStalled(int stage, int replica, const v1::Stalled& stalled) {
  CheckInLoop();
  // Not picked again until it recovers (OnReplicaReady, same instance); what it
  // held is lost, so those requests fail now rather than at the idle timeout.
  const std::string what = absl::StrCat(
      "stalled: step ", stalled.step(), " has run for ",
      absl::FormatDuration(absl::Milliseconds(stalled.running_ms())), " (stall timeout ",
      absl::FormatDuration(absl::Milliseconds(stalled.stall_timeout_ms())), ")");
  if (pools_[stage]->alive(replica)) {
    metrics_.Evicted(stage, "stalled");
    LogWarning({"", stage, replica, ""},
               absl::StrCat(what, "; ", LossVerb(stage), " its ",
                            pools_[stage]->BoundCount(replica),
                            " request(s), not picking it until it recovers"));
  }
  const std::vector<std::string> lost =
      pools_[stage]->MarkDown(replica, absl::UnavailableError(what));
  LoseRequests(stage, replica, lost,
               StageErrorAt(absl::StatusCode::kUnavailable, stage, replica, what));
}

void PipelineCore::OnReplicaDraining(int stage, int replica, const v1::Draining& draining) {
  CheckInLoop();
  // Its requests go on to their end (or to the worker's drain timeout, which
  // ends each with a finished ABORT); new ones go elsewhere.
  pools_[stage]->Drain(replica);
  LogInfo({"", stage, replica, ""},
          absl::StrCat("draining: not picked for new requests; its ",
                       pools_[stage]->BoundCount(replica), " request(s) go on"));
}

void PipelineCore::OnCommandRejected(int stage, int replica,
                                     const v1::CommandRejected& rejected) {
  CheckInLoop();
  const std::string& id = rejected.request_id();
  if (table_.Find(id) == nullptr || pools_[stage]->Bound(id) != replica) return;
  // A rejected Add never started there; after anything else the worker still
  // holds the request, so the binding stays and the ending aborts it there.
  if (rejected.command() == v1::CommandRejected::KIND_ADD) pools_[stage]->Release(id);
  v1::Error error = StageErrorAt(StatusFromErrorProto(rejected.error()).code(), stage, replica,
                                 absl::StrCat("rejected the request: ", rejected.error().message()));
  error.set_field(rejected.error().field());
  FailRequests({id}, error);
}

}  // namespace omnistage
