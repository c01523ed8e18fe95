// PipelineCore's side of its replicas (pipeline_core.h, ReplicaListener): a
// replica up, down, stalled, draining, or refusing a command, and what that
// does to the requests bound to it: each fails over where its stage has
// failover on (failover.h, docs/reliability.md), and fails otherwise.
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/error_proto.h"
#include "common/log.h"
#include "orchestrator/core/pipeline_core.h"

namespace omnistage {
namespace {

// What happens to a lost replica's requests, for its log line.
const char* LossVerb(const StageConfig& stage) {
  return stage.failover_max_attempts > 0 ? "resuming elsewhere (failover)" : "failing";
}

}  // namespace

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
  if (stage == 0) starts_.Pump();
}

void PipelineCore::OnReplicaDown(int stage, int replica, const absl::Status& reason) {
  CheckInLoop();
  // A reconnect attempt that fails again is no new eviction; it is logged when
  // its reason is new (the first attempt after the replica joined, or the
  // cause changed), so a replica that never comes up says why.
  if (pools_[stage]->alive(replica)) {
    metrics_.Evicted(stage, "stream_ended");
    LogWarning({"", stage, replica, ""},
               absl::StrCat("down: ", reason.message(), "; ", LossVerb(config_.stages[stage]),
                            " its ", pools_[stage]->BoundCount(replica), " request(s)"));
  } else if (pools_[stage]->state(replica).last_error != reason.message()) {
    LogWarning({"", stage, replica, ""},
               absl::StrCat("not reachable at ", pools_[stage]->state(replica).address, ": ",
                            reason.message(), "; retrying"));
  }
  HandleReplicaLoss(stage, ReplicaLoss{replica, reason, pools_[stage]->MarkDown(replica, reason)});
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
               absl::StrCat(what, "; ", LossVerb(config_.stages[stage]), " its ",
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

void PipelineCore::OnCommandRejected(int stage, int replica, const v1::CommandRejected& rejected) {
  CheckInLoop();
  const std::string& id = rejected.request_id();
  if (table_.Find(id) == nullptr || pools_[stage]->Bound(id) != replica) return;
  // A rejected Add never started there; after anything else the worker still
  // holds the request, so the binding stays and the ending aborts it there.
  if (rejected.command() == v1::CommandRejected::KIND_ADD) pools_[stage]->Release(id);
  v1::Error error =
      StageErrorAt(StatusFromErrorProto(rejected.error()).code(), stage, replica,
                   absl::StrCat("rejected the request: ", rejected.error().message()));
  error.set_field(rejected.error().field());
  FailRequests({id}, error);
}

// ---- Losses ------------------------------------------------------------------------

void PipelineCore::LoseRequests(int stage, int replica, const std::vector<std::string>& ids,
                                const v1::Error& error) {
  if (config_.stages[stage].failover_max_attempts == 0) {
    FailRequests(ids, error);
    return;
  }
  for (const std::string& id : ids) {
    InFlightRequest* r = table_.Find(id);
    // Gone, or already resumed by a loss handled meanwhile.
    if (r == nullptr || pools_[stage]->Bound(id).has_value()) continue;
    if (std::optional<v1::Error> failed = FailOver(*r, stage, replica, error)) {
      FailRequests({id}, *failed);
    }
  }
}

std::optional<v1::Error> PipelineCore::FailOver(InFlightRequest& r, int stage, int lost_replica,
                                                const v1::Error& error) {
  Failover::Resumed resumed = failover_.Resume(r, stage, lost_replica, error);
  if (!resumed.failed.has_value() && r.stages[stage].replica != lost_replica) {
    tracing_.FailedOver(r, stage, lost_replica, error.message());
  }
  // Replicas found dead on the way: their requests are lost in turn.
  for (const ReplicaLoss& loss : resumed.lost) {
    metrics_.Evicted(stage, "send_failed");
    HandleReplicaLoss(stage, loss);
  }
  return resumed.failed;
}

void PipelineCore::ResumeLostStages(InFlightRequest& r) {
  if (r.failover == nullptr) return;
  const std::string id = r.id;
  for (size_t s = 0; s < r.failover->stages.size(); ++s) {
    InFlightRequest* still = table_.Find(id);
    if (still == nullptr) return;
    StageReplay& replay = still->failover->stages[s];
    if (!replay.lost_while_aborting) continue;
    const int stage = static_cast<int>(s);
    const v1::Error error =
        StageErrorAt(absl::StatusCode::kUnavailable, stage, still->stages[s].replica,
                     "went away while an abort held the request");
    if (std::optional<v1::Error> failed =
            FailOver(*still, stage, still->stages[s].replica, error)) {
      FailRequests({id}, *failed);
    }
  }
}

}  // namespace omnistage
