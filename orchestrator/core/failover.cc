#include "orchestrator/core/failover.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "orchestrator/core/stage_error.h"

namespace omnistage {
namespace {

std::string DescribeMark(const ContentMark& mark) {
  return absl::StrCat(mark.text_bytes, " bytes of text, ", mark.token_ids, " token ids, ",
                      mark.audio_bytes, " bytes of audio, ", mark.raw_payloads, " raw payloads");
}

int FirstFailoverStage(const PipelineConfig& config) {
  for (size_t s = 0; s < config.stages.size(); ++s) {
    if (config.stages[s].failover_max_attempts > 0) return static_cast<int>(s);
  }
  return static_cast<int>(config.stages.size());
}

}  // namespace

Failover::Failover(CoreParts core) : core_(core), first_stage_(FirstFailoverStage(*core.config)) {}

std::unique_ptr<FailoverState> Failover::StateFor(const v1::GenerateRequest& request,
                                                  int last_stage) const {
  if (request.disable_failover() || last_stage < first_stage_) return nullptr;
  return std::make_unique<FailoverState>(core_.config->stages.size());
}

bool Failover::Covers(const InFlightRequest& r, int stage) const {
  return r.failover != nullptr && !r.failover->overflowed &&
         core_.stage(stage).failover_max_attempts > 0;
}

void Failover::KeepInput(InFlightRequest& r, int stage, const v1::Payload& payload, bool complete) {
  if (!Covers(r, stage)) return;
  StageReplay& replay = r.failover->stages[stage];
  replay.input_complete = complete;
  Charge(r, stage, replay.KeepInput(payload));
}

void Failover::Charge(InFlightRequest& r, int stage, int64_t bytes) {
  FailoverState& state = *r.failover;
  state.kept_bytes += bytes;
  if (state.kept_bytes <= core_.config->max_replay_bytes) return;
  // Keeping more would let one request hold any amount of memory: it goes on
  // without failover, and says so if a replica loses it. A replay under way
  // still drops what it repeats (PassOn).
  state.overflowed = true;
  for (StageReplay& kept : state.stages) kept.Clear();
  Log(LogLevel::kDebug, ContextOf(r, stage),
      absl::StrCat("no longer fails over: what it keeps to resume passed "
                   "limits.max_replay_bytes (",
                   core_.config->max_replay_bytes, ")"));
}

std::optional<v1::Error> Failover::PassOn(InFlightRequest& r, int stage, int replica,
                                          v1::RequestOutput& output) {
  if (r.failover == nullptr) return std::nullopt;
  StagePool& pool = core_.pool(stage);
  StageReplay& replay = r.failover->stages[stage];
  if (replay.replaying.has_value()) {
    absl::Status same = replay.replaying->Trim(output.mutable_payloads());
    const bool ended = output.finished() && (output.finish_reason() == v1::FINISH_REASON_STOP ||
                                             output.finish_reason() == v1::FINISH_REASON_LENGTH);
    if (same.ok() && ended) same = replay.replaying->CheckEnded();
    if (!same.ok()) {
      core_.metrics->Failover(stage, "replay_mismatch");
      // The ending stops it there if it still runs.
      if (output.finished()) pool.Release(r.id);
      return StageError(absl::StatusCode::kDataLoss, core_.stage(stage), pool, replica,
                        absl::StrCat("resumed the request by replay, but ", same.message(),
                                     " (its engine is not deterministic given the request's "
                                     "input and seed)"));
    }
    if (replay.replaying->done()) replay.replaying.reset();
  }
  // Past its bound the request fails over no more: nothing to count or keep.
  if (!Covers(r, stage)) return std::nullopt;
  const bool continues = pool.state(replica).resume == v1::RESUME_MODE_CONTINUATION;
  int64_t kept = 0;
  for (const v1::Payload& payload : output.payloads()) {
    replay.delivered.Add(payload);
    if (continues) kept += replay.KeepProduced(payload);
  }
  if (!continues && output.payloads_size() > 0) replay.produced_whole = false;
  if (kept > 0) Charge(r, stage, kept);
  return std::nullopt;
}

Failover::Resumed Failover::Resume(InFlightRequest& r, int stage, int lost_replica,
                                   const v1::Error& error) {
  Resumed resumed;
  const int max_attempts = core_.stage(stage).failover_max_attempts;
  if (r.failover == nullptr || max_attempts == 0) {
    resumed.failed = error;
    return resumed;
  }
  StageReplay& replay = r.failover->stages[stage];
  if (r.aborting > 0) {
    // An abort holds it: if that abort succeeds the request ends, and it must
    // not start anywhere meanwhile; if it fails, the core resumes it then.
    replay.lost_while_aborting = true;
    return resumed;
  }
  replay.lost_while_aborting = false;
  auto refuse = [&](absl::string_view outcome, absl::string_view why) {
    core_.metrics->Failover(stage, outcome);
    v1::Error refused = error;
    refused.set_message(absl::StrCat(error.message(), "; not resumed elsewhere: ", why));
    return refused;
  };
  if (r.failover->overflowed) {
    resumed.failed = refuse("replay_too_large", absl::StrCat("what it keeps to resume passed "
                                                             "limits.max_replay_bytes (",
                                                             core_.config->max_replay_bytes, ")"));
    return resumed;
  }
  if (replay.attempts >= max_attempts) {
    resumed.failed =
        refuse("attempts_exhausted", absl::StrCat("it failed over ", replay.attempts,
                                                  " time(s) already (failover.max_attempts)"));
    return resumed;
  }
  ++replay.attempts;
  v1::AddRequest add;
  add.set_request_id(r.id);
  for (const v1::Payload& p : replay.input) *add.add_input() = p;
  add.set_input_complete(replay.input_complete);
  *add.mutable_params() = r.params[stage];
  add.set_traceparent(TraceparentFor(r, stage));
  add.set_tracestate(r.tracestate);
  std::string how;
  const bool nothing_delivered = replay.delivered.empty();
  StagePool& pool = core_.pool(stage);
  SubmitResult sent = pool.Submit(
      &add,
      [&](const ReplicaState& to, v1::AddRequest* again) -> absl::Status {
        again->clear_produced();
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
            for (v1::Payload& p : replay.Produced()) *again->add_produced() = std::move(p);
            how = absl::StrCat("continued after the ", DescribeMark(replay.delivered),
                               " produced before");
            return absl::OkStatus();
          default:
            return absl::FailedPreconditionError(
                "its engine declares no way to resume a request (docs/engines.md)");
        }
      },
      PickContext{r.session_key, nullptr, core_.scheduler->Now()});
  if (sent.status.ok()) {
    r.stages[stage].replica = sent.replica;
    if (!nothing_delivered && pool.state(sent.replica).resume == v1::RESUME_MODE_REPLAY) {
      replay.replaying.emplace(replay.delivered);
    }
    core_.metrics->Failover(stage, "resumed");
    Log(LogLevel::kDebug, ContextOf(r, stage, sent.replica),
        absl::StrCat("resumed here after replica ", lost_replica, " lost it (attempt ",
                     replay.attempts, " of ", max_attempts, "): ", how));
  } else if (sent.replica < 0) {
    resumed.failed = refuse("no_live_replica", "the stage has no other live replica");
  } else {
    resumed.failed = refuse("not_resumable",
                            absl::StrCat("replica ", sent.replica, ": ", sent.status.message()));
  }
  resumed.lost = std::move(sent.lost);
  return resumed;
}

}  // namespace omnistage
