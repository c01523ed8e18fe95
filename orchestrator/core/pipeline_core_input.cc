// PipelineCore's streamed input (pipeline_core.h): a GenerateDuplex request's
// later messages feed stage 0 while its outputs stream back
// (docs/clients.md, "Streamed input").
//
// Input goes to stage 0 as AppendInput commands on the replica the request is
// bound to, so the worker sees it in order after the AddRequest; while the
// request waits in the admission queue it is held and goes with the AddRequest.
// Failover keeps it as it keeps any stage's streamed input. A request whose
// input is open does not go idle for want of output (stages may rightly wait
// for more input); its client's pauses are bounded by limits.input_idle_ms.
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/error_proto.h"
#include "common/field_error.h"
#include "orchestrator/core/generate_request.h"
#include "orchestrator/core/pipeline_core.h"

namespace omnistage {

absl::Status PipelineCore::CheckTakesStreamedInput() const {
  const StagePool& pool = *pools_[0];
  for (int replica : pool.LiveReplicas()) {
    if (pool.state(replica).streamed_input != v1::STREAMED_INPUT_NONE) continue;
    return absl::FailedPreconditionError(absl::StrCat(
        "stage 0 (", config_.stages[0].name, ", engine ", config_.stages[0].engine,
        ") takes no streamed input: its replica ", replica,
        " says its engine takes none in pieces (Ready.streamed_input NONE); send the whole "
        "prompt with Generate"));
  }
  return absl::OkStatus();
}

void PipelineCore::AppendInput(const std::string& id, const ResponseSink* sink,
                               v1::GenerateInput message) {
  CheckInLoop();
  InFlightRequest* found = table_.Find(id);
  // It ended (or never started): what the client still sends goes nowhere.
  if (found == nullptr || found->owner != sink || found->input == nullptr) return;
  InFlightRequest& r = *found;
  InputStream& input = *r.input;
  if (!input.open) {
    FailInput(r, AtField(absl::InvalidArgumentError(
                             "input came after the message that said it was the last"),
                         "input.last"));
    return;
  }
  int64_t bytes = 0;
  if (absl::Status s = ValidateInputMessage(config_, message, input.bytes, &bytes); !s.ok()) {
    FailInput(r, s);
    return;
  }
  metrics_.InputStreamed(bytes);
  v1::InputChunk& chunk = *message.mutable_input();
  const absl::Time now = scheduler_->Now();
  input.bytes += bytes;
  input.last_at = now;
  r.last_activity = now;
  if (chunk.last()) {
    input.open = false;
    scheduler_->Cancel(input.idle_timer);
    input.idle_timer = 0;
  }
  Log(LogLevel::kDebug, ContextOf(r, 0),
      absl::StrCat("input: ", chunk.payloads_size(), " payload(s), ", bytes, " bytes",
                   chunk.last() ? ", the last" : ""));
  if (!r.stages[0].started) {  // Queued: it goes with the AddRequest.
    for (v1::Payload& p : *chunk.mutable_payloads()) input.held.push_back(std::move(p));
    return;
  }
  // Stage 0 ended early (max_tokens): the rest of the input has nowhere to go.
  if (r.stages[0].finished) return;
  if (std::optional<v1::Error> error = SendMoreInput(r, 0, chunk.payloads(), chunk.last())) {
    FailRequests({id}, *error);
  }
}

void PipelineCore::FailInput(InFlightRequest& r, const absl::Status& refusal) {
  LogInfo(ContextOf(r), absl::StrCat("input refused: ", refusal.message()));
  const std::string field = ErrorField(refusal);
  metrics_.InputRefused(field == kInputChunkLimitField   ? "chunk_too_large"
                        : field == kInputBytesLimitField ? "too_much"
                        : field == kInputIdleLimitField  ? "idle"
                        : field == "input.last"          ? "after_last"
                                                         : "malformed");
  FailRequests({r.id},
               ErrorProto(WithMessage(refusal, absl::StrCat("streamed input: ", refusal.message()))));
}

void PipelineCore::ArmInputTimer(InFlightRequest& r) {
  r.input->idle_timer = scheduler_->PostAt(r.input->last_at + config_.input_idle_timeout,
                                           [this, alive = std::weak_ptr<bool>(alive_), id = r.id] {
                                             if (!alive.expired()) OnInputIdle(id);
                                           });
}

void PipelineCore::OnInputIdle(const std::string& id) {
  InFlightRequest* r = table_.Find(id);
  if (r == nullptr || r->input == nullptr) return;
  r->input->idle_timer = 0;
  if (!r->input->open) return;
  // Re-armed lazily: a message moves last_at, not the timer.
  if (scheduler_->Now() - r->input->last_at < config_.input_idle_timeout) {
    ArmInputTimer(*r);
    return;
  }
  FailInput(*r, AtField(absl::DeadlineExceededError(absl::StrCat(
                            "no input for ", absl::FormatDuration(config_.input_idle_timeout),
                            " while it was open (limits.input_idle_ms); send the last message "
                            "with last, or half-close the call, when the input is complete")),
                        kInputIdleLimitField));
}

}  // namespace omnistage
