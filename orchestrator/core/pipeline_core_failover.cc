// PipelineCore's failover (docs/reliability.md, "Failover"): on a stage with
// `failover: {max_attempts: N}`, a request whose replica goes away (its stream
// breaks, it stalls, a send to it fails, its drain timeout stops the request)
// is started again on another live replica of the stage, with the same
// parameters and every input the stage had received, while the stages around
// it keep their bindings. An engine that resumes by replay runs it again and
// the part already delivered is dropped here (replay.h), checked against what
// was delivered; one that resumes by continuation is sent what it produced and
// goes on after it. Either way the client and the next stage receive exactly
// what a fault-free run would have given them.
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "orchestrator/core/pipeline_core.h"

namespace omnistage {
namespace {

std::string DescribeMark(const ContentMark& mark) {
  return absl::StrCat(mark.text_bytes, " bytes of text, ", mark.token_ids, " token ids, ",
                      mark.audio_bytes, " bytes of audio, ", mark.raw_payloads, " raw payloads");
}

}  // namespace

bool PipelineCore::FailsOver(const InFlightRequest& r, int stage) const {
  return r.failover != nullptr && !r.failover->overflowed &&
         config_.stages[stage].failover_max_attempts > 0;
}

void PipelineCore::KeepInput(InFlightRequest& r, int stage, const v1::Payload& payload,
                             bool complete) {
  if (!FailsOver(r, stage)) return;
  StageReplay& replay = r.failover->stages[stage];
  replay.input_complete = complete;
  ChargeReplayBytes(r, stage, replay.KeepInput(payload));
}

void PipelineCore::ChargeReplayBytes(InFlightRequest& r, int stage, int64_t bytes) {
  FailoverState& state = *r.failover;
  state.kept_bytes += bytes;
  if (state.kept_bytes <= config_.max_replay_bytes) return;
  // Keeping more would let one request hold any amount of memory: it goes on
  // without failover, and says so if a replica loses it. A replay under way
  // still drops what it repeats (PassOnOutput).
  state.overflowed = true;
  for (StageReplay& kept : state.stages) kept.Clear();
  Log(LogLevel::kDebug, ContextOf(r, stage),
      absl::StrCat("no longer fails over: what it keeps to resume passed "
                   "limits.max_replay_bytes (",
                   config_.max_replay_bytes, ")"));
}

bool PipelineCore::PassOnOutput(InFlightRequest& r, int stage, int replica,
                                v1::RequestOutput& output) {
  if (r.failover == nullptr) return true;
  StageReplay& replay = r.failover->stages[stage];
  if (replay.replaying.has_value()) {
    absl::Status same = replay.replaying->Trim(output.mutable_payloads());
    const bool ended = output.finished() && (output.finish_reason() == v1::FINISH_REASON_STOP ||
                                             output.finish_reason() == v1::FINISH_REASON_LENGTH);
    if (same.ok() && ended) same = replay.replaying->CheckEnded();
    if (!same.ok()) {
      metrics_.Failover(stage, "replay_mismatch");
      // The ending stops it there if it still runs.
      if (output.finished()) pools_[stage]->Release(r.id);
      FailRequests({r.id},
                   StageErrorAt(absl::StatusCode::kDataLoss, stage, replica,
                                absl::StrCat("resumed the request by replay, but ", same.message(),
                                             " (its engine is not deterministic given the "
                                             "request's input and seed)")));
      return false;
    }
    if (replay.replaying->done()) replay.replaying.reset();
  }
  // Past its bound the request fails over no more: nothing to count or keep.
  if (!FailsOver(r, stage)) return true;
  const bool continues = pools_[stage]->state(replica).resume == v1::RESUME_MODE_CONTINUATION;
  int64_t kept = 0;
  for (const v1::Payload& payload : output.payloads()) {
    replay.delivered.Add(payload);
    if (continues) kept += replay.KeepProduced(payload);
  }
  if (!continues && output.payloads_size() > 0) replay.produced_whole = false;
  if (kept > 0) ChargeReplayBytes(r, stage, kept);
  return true;
}

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
  if (r.failover == nullptr || config_.stages[stage].failover_max_attempts == 0) return error;
  StageReplay& replay = r.failover->stages[stage];
  if (r.aborting > 0) {
    // An abort holds it: if that abort succeeds the request ends, and it must
    // not start anywhere meanwhile; if it fails, ResumeLostStages goes on.
    replay.lost_while_aborting = true;
    return std::nullopt;
  }
  replay.lost_while_aborting = false;
  auto refuse = [&](absl::string_view outcome, absl::string_view why) {
    metrics_.Failover(stage, outcome);
    v1::Error refused = error;
    refused.set_message(absl::StrCat(error.message(), "; not resumed elsewhere: ", why));
    return refused;
  };
  const int max_attempts = config_.stages[stage].failover_max_attempts;
  if (r.failover->overflowed) {
    return refuse("replay_too_large",
                  absl::StrCat("what it keeps to resume passed limits.max_replay_bytes (",
                               config_.max_replay_bytes, ")"));
  }
  if (replay.attempts >= max_attempts) {
    return refuse("attempts_exhausted",
                  absl::StrCat("it failed over ", replay.attempts,
                               " time(s) already (failover.max_attempts)"));
  }
  ++replay.attempts;
  v1::AddRequest add;
  add.set_request_id(r.id);
  for (const v1::Payload& p : replay.input) *add.add_input() = p;
  add.set_input_complete(replay.input_complete);
  *add.mutable_params() = r.params[stage];
  add.set_traceparent(r.traceparent);
  std::string how;
  const bool nothing_delivered = replay.delivered.empty();
  SubmitResult sent = pools_[stage]->Submit(
      &add, [&](const ReplicaState& to, v1::AddRequest* resumed) -> absl::Status {
        resumed->clear_produced();
        if (nothing_delivered) {
          how = "started again (it had delivered nothing yet)";
          return absl::OkStatus();
        }
        switch (to.resume) {
          case v1::RESUME_MODE_REPLAY:
            how = absl::StrCat("replayed, dropping the ", DescribeMark(replay.delivered),
                               " delivered before");
            return absl::OkStatus();
          case v1::RESUME_MODE_CONTINUATION:
            if (!replay.produced_whole) {
              return absl::FailedPreconditionError(
                  "its engine resumes by continuation, but what the request produced was not "
                  "kept (the replica it ran on resumes by replay)");
            }
            for (v1::Payload& p : replay.Produced()) *resumed->add_produced() = std::move(p);
            how = absl::StrCat("continued after the ", DescribeMark(replay.delivered),
                               " produced before");
            return absl::OkStatus();
          default:
            return absl::FailedPreconditionError(
                "its engine declares no way to resume a request (docs/engines.md)");
        }
      },
      PickContext{r.session_key, nullptr, scheduler_->Now()});
  std::optional<v1::Error> failed;
  if (sent.status.ok()) {
    r.stages[stage].replica = sent.replica;
    if (!nothing_delivered && pools_[stage]->state(sent.replica).resume == v1::RESUME_MODE_REPLAY) {
      replay.replaying.emplace(replay.delivered);
    }
    metrics_.Failover(stage, "resumed");
    Log(LogLevel::kDebug, ContextOf(r, stage, sent.replica),
        absl::StrCat("resumed here after replica ", lost_replica, " lost it (attempt ",
                     replay.attempts, " of ", max_attempts, "): ", how));
  } else if (sent.replica < 0) {
    failed = refuse("no_live_replica", "the stage has no other live replica");
  } else {
    failed = refuse("not_resumable", absl::StrCat("replica ", sent.replica, ": ",
                                                  sent.status.message()));
  }
  // Replicas found dead on the way: their requests are lost in turn.
  for (const ReplicaLoss& loss : sent.lost) {
    metrics_.Evicted(stage, "send_failed");
    HandleReplicaLoss(stage, loss);
  }
  return failed;
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
    const v1::Error error = StageErrorAt(absl::StatusCode::kUnavailable, stage,
                                         still->stages[s].replica,
                                         "went away while an abort held the request");
    if (std::optional<v1::Error> failed = FailOver(*still, stage, still->stages[s].replica, error)) {
      FailRequests({id}, *failed);
    }
  }
}

}  // namespace omnistage
