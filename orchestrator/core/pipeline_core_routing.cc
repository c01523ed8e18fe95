// PipelineCore's stages (pipeline_core.h): a request started on stage 0, sent
// to each next stage per its input mode (on_finish or streaming), the
// workers' outputs folded, trimmed by failover and streamed to the client,
// and the request completed once its client-facing stages finished.
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/error_proto.h"
#include "common/invariant.h"
#include "common/log.h"
#include "orchestrator/core/output_fold.h"
#include "orchestrator/core/pipeline_core.h"
#include "orchestrator/core/stage_audio.h"

namespace omnistage {

std::optional<v1::Error> PipelineCore::StartFirstStage(InFlightRequest& r, std::string prompt) {
  std::vector<v1::Payload> input;
  // A streamed-input request may start with no prompt: its input follows.
  if (!prompt.empty()) input.emplace_back().mutable_text()->set_text(std::move(prompt));
  if (r.input == nullptr) return StartStage(r, 0, std::move(input), /*complete=*/true);
  // What streamed in while it waited in the queue goes with it.
  for (v1::Payload& p : r.input->held) input.push_back(std::move(p));
  r.input->held.clear();
  return StartStage(r, 0, std::move(input), /*complete=*/!r.input->open);
}

std::optional<v1::Error> PipelineCore::StartStage(InFlightRequest& r, int stage,
                                                  std::vector<v1::Payload> input, bool complete) {
  if (!OMNISTAGE_INVARIANT_HOLDS(table_.Find(r.id) == &r, ContextOf(r, stage),
                                 "starting a stage of a request not in flight")) {
    return StageErrorAt(absl::StatusCode::kInternal, stage, -1,
                        "internal error: the request is not in flight (a bug, logged and counted)");
  }
  v1::AddRequest add;
  add.set_request_id(r.id);
  for (v1::Payload& p : input) {
    failover_.KeepInput(r, stage, p, complete);
    *add.add_input() = std::move(p);
  }
  add.set_input_complete(complete);
  *add.mutable_params() = r.params[stage];
  add.set_traceparent(tracing_.StageStarting(r, stage));
  add.set_tracestate(r.tracestate);
  SubmitResult sent = pools_[stage]->Submit(
      &add, nullptr,
      PickContext{r.session_key, nullptr, scheduler_->Now(), planner_.Avoid(r, stage)});
  // The request was bound to none of the lost replicas when they were evicted.
  std::string lost_reason;
  for (const ReplicaLoss& loss : sent.lost) {
    lost_reason = absl::StrCat(" (replica ", loss.replica, ": ", loss.reason.message(), ")");
    metrics_.Evicted(stage, "send_failed");
    HandleReplicaLoss(stage, loss);
  }
  if (sent.status.ok()) {
    r.stages[stage].started = true;
    r.stages[stage].replica = sent.replica;
    r.stages[stage].sent_at = scheduler_->Now();
    planner_.Started(r, stage);
    tracing_.StageSent(r, stage, sent.replica);
    Log(LogLevel::kDebug, ContextOf(r, stage, sent.replica), "sent to the stage");
    return std::nullopt;
  }
  v1::Error error =
      sent.replica < 0
          ? StageErrorAt(absl::StatusCode::kUnavailable, stage, -1,
                         absl::StrCat("has no live replica", lost_reason))
          : StageErrorAt(sent.status.code(), stage, sent.replica,
                         absl::StrCat("could not take the request: ", sent.status.message()));
  tracing_.StageNotSent(r, stage, error.message());
  return error;
}

void PipelineCore::OnStepOutputs(int stage, int replica, v1::StepOutputs& outputs) {
  CheckInLoop();
  if (outputs.has_load()) {
    pools_[stage]->ReportLoad(replica, outputs.load().requests(), scheduler_->Now());
    if (outputs.load().has_cache()) pools_[stage]->ReportCache(replica, outputs.load().cache());
  }
  // An event without a load says nothing of whether the engine went idle.
  planner_.Step(stage, replica, outputs.step(),
                !outputs.has_load() || outputs.load().requests() > 0);
  FoldOutputs(&outputs);
  // Nothing leaves the admission queue until the whole batch is handled: a
  // request sent now could take an id whose older outputs are still below.
  starts_.Hold();
  for (v1::RequestOutput& output : *outputs.mutable_outputs()) {
    // Not ours any more (ended, or re-bound after this replica was evicted).
    if (pools_[stage]->Bound(output.request_id()) != replica) continue;
    InFlightRequest* r = table_.Find(output.request_id());
    if (r == nullptr) {
      if (!OMNISTAGE_INVARIANT_HOLDS(abort_.CleaningUp(output.request_id()),
                                     (LogContext{output.request_id(), stage, replica, ""}),
                                     "a binding without a request")) {
        abort_.CleanUp({output.request_id()});  // Stop it there and let the binding go.
      }
      continue;
    }
    if (r->aborting > 0) {
      r->deferred.push_back(DeferredOutput{stage, replica, output});
      continue;
    }
    HandleOutput(*r, stage, replica, output);
  }
  starts_.Release();  // The load report or the requests that ended freed slots.
}

void PipelineCore::HandleOutput(InFlightRequest& r, int stage, int replica,
                                v1::RequestOutput& output) {
  r.last_activity = scheduler_->Now();
  const std::string id = r.id;
  if (std::optional<v1::Error> differs = failover_.PassOn(r, stage, replica, output)) {
    FailRequests({id}, *differs);
    return;
  }
  planner_.Output(r, stage, replica, output);
  tracing_.StageOutput(r, stage, output);
  for (const v1::Payload& p : output.payloads()) r.stages[stage].produced += StageAudio::Units(p);
  if (r.to_client[stage] && output.payloads_size() > 0) {
    std::vector<v1::OutputChunk> chunks;
    chunks.reserve(output.payloads_size());
    // Counted for the request's record, and charged to an identity with an
    // output-token rate.
    const absl::Time now = scheduler_->Now();
    int64_t output_tokens = 0;
    for (const v1::Payload& p : output.payloads()) {
      output_tokens += r.account.Delivered(p, now);
      if (p.has_text()) r.partial_text[stage] += p.text().text();
      if (p.has_tokens()) {
        r.partial_tokens[stage].insert(r.partial_tokens[stage].end(), p.tokens().ids().begin(),
                                       p.tokens().ids().end());
      }
      v1::OutputChunk& chunk = chunks.emplace_back();
      chunk.set_stage_id(stage);
      chunk.set_modality(config_.stages[stage].output_modality);
      *chunk.mutable_payload() = p;
    }
    if (output_tokens > 0 && rate_limiter_.ChargesOutputOf(r.caller)) {
      rate_limiter_.ChargeOutput(r.caller, output_tokens, now);
    }
    r.sink->Send(id, std::move(chunks));
    deadlines_.Delivered(r, now);
  }
  if (output.finished()) metrics_.StageDone(stage, scheduler_->Now() - r.stages[stage].sent_at);
  if (output.finished() && output.finish_reason() == v1::FINISH_REASON_ABORT && r.abort_asked) {
    // Stopped by an abort of ours whose answer did not come in time (the
    // client heard it failed): the abort goes on from here. The stages that
    // still run it are stopped, and once they confirm it ends ABORT, as any
    // abort commits: never while a stage may still run it.
    pools_[stage]->Release(id);
    LogInfo(ContextOf(r, stage, replica),
            "stopped by an earlier abort whose answer had not come: stopping it on the other "
            "stages, then it ends as aborted");
    abort_.Cancel(id);
    return;
  }
  if (output.finished() && (output.finish_reason() == v1::FINISH_REASON_ERROR ||
                            output.finish_reason() == v1::FINISH_REASON_ABORT)) {
    // The worker failed it, or something other than this orchestrator stopped it
    // there (this orchestrator's own aborts hold the request's outputs back).
    // Either way it cannot go on: it ends now, saying so.
    const bool stopped = output.finish_reason() == v1::FINISH_REASON_ABORT;
    pools_[stage]->Release(id);  // The worker holds nothing for it any more.
    const v1::Error error = StageErrorAt(
        stopped ? absl::StatusCode::kAborted : StatusFromErrorProto(output.error()).code(), stage,
        replica,
        absl::StrCat(stopped ? "stopped the request: " : "failed: ", output.error().message()));
    if (stopped && pools_[stage]->state(replica).draining) {
      // The worker's drain timeout stopped it: the replica is going away, as
      // if its stream had broken (with failover on, the request moves).
      LoseRequests(stage, replica, {id}, error);
      return;
    }
    FailRequests({id}, error);
    return;
  }
  // The worker holds nothing for a finished request: release before a failed
  // hand-off could abort it there.
  if (output.finished()) pools_[stage]->Release(id);
  if (stage < r.last_stage) {
    HandOff(r, stage, output);
    if (table_.Find(id) == nullptr) return;  // The hand-off failed it.
  }
  if (output.finished()) {
    r.stages[stage].finished = true;
    r.stages[stage].reason = output.finish_reason();
    MaybeComplete(r);
  }
}

void PipelineCore::HandOff(InFlightRequest& r, int stage, v1::RequestOutput& output) {
  const int next = stage + 1;
  StageProgress& to = r.stages[next];
  if (to.finished) return;  // It ended early (e.g. max_tokens).
  const std::string id = r.id;
  const bool last = output.finished();
  std::optional<v1::Error> error;
  if (config_.stages[next].input_mode == InputMode::kOnFinish) {
    for (v1::Payload& p : *output.mutable_payloads()) to.pending_input.push_back(p);
    if (!last) return;
    error = StartStage(r, next, std::move(to.pending_input), /*complete=*/true);
  } else if (output.payloads_size() == 0 && !last) {
    return;
  } else if (!to.started) {
    error = StartStage(r, next, {output.payloads().begin(), output.payloads().end()}, last);
  } else {
    error = SendMoreInput(r, next, output.payloads(), last);
  }
  if (error.has_value()) {
    FailRequests({id}, *error);
  } else if (InFlightRequest* still = last ? table_.Find(id) : nullptr) {
    // (A replica lost on the way failed the request: it is gone.)
    tracing_.InputComplete(*still, next);
  }
}

std::optional<v1::Error> PipelineCore::SendMoreInput(
    InFlightRequest& r, int stage, const google::protobuf::RepeatedPtrField<v1::Payload>& payloads,
    bool last) {
  v1::AppendInput append;
  append.set_request_id(r.id);
  *append.mutable_chunks() = payloads;
  for (const v1::Payload& p : payloads) failover_.KeepInput(r, stage, p, last);
  if (payloads.empty() && last && failover_.Covers(r, stage)) {
    r.failover->stages[stage].input_complete = true;
  }
  append.set_last(last);
  std::optional<ReplicaLoss> lost;
  const absl::Status sent = pools_[stage]->Append(std::move(append), &lost);
  if (lost.has_value()) {
    // The replica is gone, and every request bound to it fails, this one too.
    metrics_.Evicted(stage, "send_failed");
    HandleReplicaLoss(stage, *lost);
    return std::nullopt;
  }
  // NOT_FOUND: an abort already stopped the request on that stage (and failed
  // elsewhere); the chunk has nowhere to go.
  if (sent.ok() || sent.code() == absl::StatusCode::kNotFound) return std::nullopt;
  return StageErrorAt(sent.code(), stage, r.stages[stage].replica,
                      absl::StrCat("could not take more input: ", sent.message()));
}

void PipelineCore::MaybeComplete(InFlightRequest& r) {
  for (size_t s = 0; s < r.stages.size(); ++s) {
    if (r.to_client[s] && !r.stages[s].finished) return;
  }
  const v1::FinishReason reason = r.stages[r.last_stage].reason;
  // Upstream stages may still run (e.g. a talker that hit max_tokens first):
  // EndRequests stops them.
  EndRequests({r.id}, [reason](const InFlightRequest&) {
    v1::Terminal terminal;
    terminal.set_finish_reason(reason);
    return terminal;
  });
}

}  // namespace omnistage
