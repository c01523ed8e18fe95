#include "stage_worker/hello.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/field_error.h"

namespace omnistage {
namespace {

// Ready.resume: how the engine takes over a request another replica lost.
v1::ResumeMode ResumeModeProto(ResumeMode mode) {
  switch (mode) {
    case ResumeMode::kReplay:
      return v1::RESUME_MODE_REPLAY;
    case ResumeMode::kContinuation:
      return v1::RESUME_MODE_CONTINUATION;
    case ResumeMode::kNone:
      break;
  }
  return v1::RESUME_MODE_UNSPECIFIED;
}

// Ready.streamed_input: whether the engine takes input in pieces.
v1::StreamedInput StreamedInputProto(StreamedInput streamed) {
  switch (streamed) {
    case StreamedInput::kNone:
      return v1::STREAMED_INPUT_NONE;
    case StreamedInput::kWhole:
      return v1::STREAMED_INPUT_WHOLE;
    case StreamedInput::kIncremental:
      return v1::STREAMED_INPUT_INCREMENTAL;
  }
  return v1::STREAMED_INPUT_UNSPECIFIED;
}

// A request with no input and only `hello`'s stage defaults, for the engine's checks.
EngineRequest DefaultsProbe(const v1::Hello& hello) {
  EngineRequest probe;
  probe.id = "hello-defaults";
  probe.input_complete = false;
  probe.params = hello.defaults();
  return probe;
}

// The engine's refusal of a request's params, as a refusal of the defaults.
absl::Status DefaultsRefused(const absl::Status& status) {
  const std::string field = ErrorField(status);
  absl::string_view within_params = field;
  absl::ConsumePrefix(&within_params, "params");
  absl::ConsumePrefix(&within_params, ".");
  return AtField(absl::InvalidArgumentError(absl::StrCat("stage defaults: ", status.message())),
                 absl::StrCat("defaults", within_params.empty() ? "" : ".", within_params));
}

}  // namespace

absl::Status CheckHello(const v1::Hello& hello, int stage_id, const Engine& engine) {
  if (hello.protocol_version() > kWorkerProtocolVersion) {
    return absl::FailedPreconditionError(absl::StrCat("protocol version ", hello.protocol_version(),
                                                      " is not supported (this worker speaks ",
                                                      kWorkerProtocolVersion, ")"));
  }
  if (hello.has_expected_stage_id() && hello.expected_stage_id() != stage_id) {
    return absl::FailedPreconditionError(absl::StrCat("this worker serves stage ", stage_id,
                                                      ", not stage ", hello.expected_stage_id()));
  }
  if (hello.has_defaults()) {
    // The client will merge these into every request: refuse them now, naming
    // the field, rather than every request later.
    absl::Status status = engine.Validate(DefaultsProbe(hello));
    if (!status.ok()) return DefaultsRefused(status);
  }
  return absl::OkStatus();
}

CoreMessage CheckDefaultsMessage(const v1::Hello& hello,
                                 std::function<void(const absl::Status&)> done) {
  return CoreMessage::Check(DefaultsProbe(hello),
                            [done = std::move(done)](const absl::Status& status) {
                              done(status.ok() ? status : DefaultsRefused(status));
                            });
}

v1::WorkerEvent ReadyEvent(const ReadyFacts& facts, const Engine& engine,
                           const std::string& session_id, int live_requests) {
  v1::WorkerEvent event;
  v1::Ready* ready = event.mutable_ready();
  ready->set_stage_id(facts.stage_id);
  ready->set_instance_id(facts.instance_id);
  ready->set_engine(facts.engine_name);
  ready->set_capacity(engine.capacity());
  ready->set_session_id(session_id);
  ready->set_protocol_version(kWorkerProtocolVersion);
  ready->set_max_message_bytes(facts.max_message_bytes);
  ready->mutable_load()->set_requests(live_requests);
  ready->set_resume(ResumeModeProto(engine.resume_mode()));
  ready->set_streamed_input(StreamedInputProto(engine.streamed_input()));
  ready->set_accepts_command_batches(true);
  ready->set_playback_deadlines(true);
  const PrefixCacheLayout cache = engine.prefix_cache();
  if (cache.block_tokens > 0) {
    ready->mutable_prefix_cache()->set_block_tokens(cache.block_tokens);
    ready->mutable_prefix_cache()->set_capacity_blocks(cache.capacity_blocks);
  }
  return event;
}

}  // namespace omnistage
