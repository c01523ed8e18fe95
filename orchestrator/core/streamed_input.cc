#include "orchestrator/core/streamed_input.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/error_proto.h"
#include "common/field_error.h"
#include "common/log.h"
#include "orchestrator/core/generate_request.h"

namespace omnistage {

StreamedInput::StreamedInput(CoreParts core, Hooks hooks) : core_(core), hooks_(std::move(hooks)) {}

absl::Status StreamedInput::CheckStageZeroTakesIt() const {
  const StagePool& pool = core_.pool(0);
  for (int replica : pool.LiveReplicas()) {
    if (pool.state(replica).streamed_input != v1::STREAMED_INPUT_NONE) continue;
    return absl::FailedPreconditionError(absl::StrCat(
        "stage 0 (", core_.config->stages[0].name, ", engine ", core_.config->stages[0].engine,
        ") takes no streamed input: its replica ", replica,
        " says its engine takes none in pieces (Ready.streamed_input NONE); send the whole "
        "prompt with Generate"));
  }
  return absl::OkStatus();
}

void StreamedInput::Open(InFlightRequest& r) {
  core_.metrics->DuplexAdmitted();
  r.input = std::make_unique<InputStream>();
  r.input->last_at = core_.scheduler->Now();
  Arm(r);
}

void StreamedInput::Append(InFlightRequest& r, v1::GenerateInput message) {
  InputStream& input = *r.input;
  if (!input.open) {
    Refuse(r, AtField(absl::InvalidArgumentError(
                          "input came after the message that said it was the last"),
                      "input.last"));
    return;
  }
  int64_t bytes = 0;
  if (absl::Status s = ValidateInputMessage(*core_.config, message, input.bytes, &bytes); !s.ok()) {
    Refuse(r, s);
    return;
  }
  core_.metrics->InputStreamed(bytes);
  v1::InputChunk& chunk = *message.mutable_input();
  const absl::Time now = core_.scheduler->Now();
  input.bytes += bytes;
  input.last_at = now;
  r.last_activity = now;
  if (chunk.last()) {
    input.open = false;
    core_.scheduler->Cancel(input.idle_timer);
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
  if (std::optional<v1::Error> error = hooks_.send(r, chunk.payloads(), chunk.last())) {
    hooks_.fail({r.id}, *error);
  }
}

void StreamedInput::Refuse(InFlightRequest& r, const absl::Status& refusal) {
  LogInfo(ContextOf(r), absl::StrCat("input refused: ", refusal.message()));
  const std::string field = ErrorField(refusal);
  core_.metrics->InputRefused(field == kInputChunkLimitField   ? "chunk_too_large"
                              : field == kInputBytesLimitField ? "too_much"
                              : field == kInputIdleLimitField  ? "idle"
                              : field == "input.last"          ? "after_last"
                                                               : "malformed");
  hooks_.fail({r.id}, ErrorProto(WithMessage(refusal,
                                             absl::StrCat("streamed input: ", refusal.message()))));
}

void StreamedInput::Arm(InFlightRequest& r) {
  r.input->idle_timer = core_.scheduler->PostAt(r.input->last_at + core_.config->input_idle_timeout,
                                                [this, alive = alive_.watch(), id = r.id] {
                                                  if (alive) OnIdle(id);
                                                });
}

void StreamedInput::OnIdle(const std::string& id) {
  InFlightRequest* r = core_.table->Find(id);
  if (r == nullptr || r->input == nullptr) return;
  r->input->idle_timer = 0;
  if (!r->input->open) return;
  // Re-armed lazily: a message moves last_at, not the timer.
  if (core_.scheduler->Now() - r->input->last_at < core_.config->input_idle_timeout) {
    Arm(*r);
    return;
  }
  Refuse(*r, AtField(absl::DeadlineExceededError(absl::StrCat(
                         "no input for ", absl::FormatDuration(core_.config->input_idle_timeout),
                         " while it was open (limits.input_idle_ms); send the last message "
                         "with last, or half-close the call, when the input is complete")),
                     kInputIdleLimitField));
}

}  // namespace omnistage
