// A Worker's session opening (worker.h): a client's Hello, checked against
// the worker and its engine, and the Ready that answers it. A session's
// commands, its end and the unary Abort are in worker_sessions.cc.
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/field_error.h"
#include "common/log.h"
#include "stage_worker/worker.h"

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
  return AtField(
      absl::InvalidArgumentError(absl::StrCat("stage defaults: ", status.message())),
      absl::StrCat("defaults", within_params.empty() ? "" : ".", within_params));
}

}  // namespace

void Worker::CheckDefaultsInLoop(const v1::Hello& hello,
                                 std::function<void(const absl::Status&)> done) {
  if (!hello.has_defaults() || !engine_->validates_in_loop()) {
    done(absl::OkStatus());
    return;
  }
  core_.Submit(CoreMessage::Check(
      DefaultsProbe(hello), [done = std::move(done)](const absl::Status& status) {
        done(status.ok() ? status : DefaultsRefused(status));
      }));
}

absl::StatusOr<std::shared_ptr<Session>> Worker::OpenSession(const v1::Hello& hello,
                                                             uint64_t hello_seq,
                                                             EventTransport* transport,
                                                             const std::string& peer) {
  if (hello.protocol_version() > kProtocolVersion) {
    return absl::FailedPreconditionError(absl::StrCat("protocol version ",
                                                      hello.protocol_version(),
                                                      " is not supported (this worker speaks ",
                                                      kProtocolVersion, ")"));
  }
  if (hello.has_expected_stage_id() && hello.expected_stage_id() != options_.stage_id) {
    return absl::FailedPreconditionError(absl::StrCat("this worker serves stage ",
                                                      options_.stage_id, ", not stage ",
                                                      hello.expected_stage_id()));
  }
  if (hello.has_defaults()) {
    // The client will merge these into every request: refuse them now, naming
    // the field, rather than every request later.
    absl::Status status = engine_->Validate(DefaultsProbe(hello));
    if (!status.ok()) return DefaultsRefused(status);
  }
  // Cache events from an engine without a cache: none to give.
  const bool wants_cache_events = hello.want_cache_events() && cache_layout_.block_tokens > 0;
  absl::MutexLock lock(&mu_);
  return std::make_shared<Session>(next_session_++, peer, transport, hello_seq, wants_cache_events);
}

void Worker::StartSession(const std::shared_ptr<Session>& session) {
  // The session is registered before anything is sent on it, and holds what it
  // is sent until Ready is written (Session::Open): a drain, a stall, a load
  // broadcast or an Abort cannot fall between the two. The drain and stall
  // already announced are read in the same critical section that registers it,
  // so each reaches it exactly once (Drain and the stall guard list sessions
  // under mu_ too).
  // Its cache snapshot is taken in that critical section too: every change
  // after it reaches the session's pending set (worker.cc takes those, after a
  // step, from the sessions it lists under mu_).
  absl::Status stopped;
  std::optional<v1::WorkerEvent> draining, stalled;
  std::optional<v1::CacheEvents> cache;
  {
    absl::MutexLock lock(&mu_);
    if (serving_) {
      sessions_[session->number()] = session;
      draining = draining_;
      stalled = stall_.StalledEvent();
      if (session->wants_cache_events()) cache = cache_reports_.Join(session->number());
    } else {
      stopped = stopped_;
    }
  }
  if (!stopped.ok()) {
    session->End(stopped);
    session->Open(std::nullopt);
    return;
  }
  if (stalled.has_value()) session->Send(*std::move(stalled));
  if (draining.has_value()) session->Send(*std::move(draining));
  v1::WorkerEvent event;
  v1::Ready* ready = event.mutable_ready();
  ready->set_stage_id(options_.stage_id);
  ready->set_instance_id(options_.instance_id);
  ready->set_engine(options_.engine_name);
  ready->set_capacity(engine_->capacity());
  ready->set_session_id(session->id());
  ready->set_protocol_version(kProtocolVersion);
  ready->set_max_message_bytes(options_.max_message_bytes);
  ready->mutable_load()->set_requests(static_cast<int>(live_requests()));
  ready->set_resume(ResumeModeProto(engine_->resume_mode()));
  ready->set_streamed_input(StreamedInputProto(engine_->streamed_input()));
  ready->set_accepts_command_batches(true);
  if (cache_layout_.block_tokens > 0) {
    ready->mutable_prefix_cache()->set_block_tokens(cache_layout_.block_tokens);
    ready->mutable_prefix_cache()->set_capacity_blocks(cache_layout_.capacity_blocks);
  }
  if (cache.has_value()) *ready->mutable_load()->mutable_cache() = *std::move(cache);
  LogInfo(ContextOf(*session),
          absl::StrCat("session opened",
                       session->peer().empty() ? "" : absl::StrCat(" by '", session->peer(), "'")));
  session->Open(std::move(event));
}

}  // namespace omnistage
