#include "orchestrator/replicas/replica_session.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/error_proto.h"
#include "common/field_error.h"
#include "common/log.h"

namespace omnistage {

ReplicaSession::ReplicaSession(ReplicaSessionOptions options, WorkerStub* stub,
                               Scheduler* scheduler)
    : options_(std::move(options)),
      stub_(stub),
      scheduler_(scheduler),
      backoff_(options_.reconnect_initial_backoff) {}

ReplicaSession::~ReplicaSession() {
  alive_.End();
  scheduler_->Cancel(reconnect_timer_);
}

void ReplicaSession::Start() { Connect(); }

void ReplicaSession::Close(const absl::Status& reason) {
  if (closed_) return;
  closed_ = true;
  ++generation_;  // The stream's own ending is not reported.
  scheduler_->Cancel(reconnect_timer_);
  reconnect_timer_ = 0;
  ready_ = false;
  if (stream_ != nullptr) {
    stream_->Cancel();
    stream_.reset();
  }
  FailUtilities(reason);
}

absl::Status ReplicaSession::NotConnected() const {
  return absl::UnavailableError(
      absl::StrCat("stage ", options_.stage, " replica ", options_.replica, " is not connected"));
}

void ReplicaSession::Connect() {
  reconnect_timer_ = 0;
  if (closed_) return;
  const uint64_t generation = ++generation_;
  ready_ = false;
  session_id_.clear();
  max_message_bytes_ = 0;
  fatal_reason_.clear();
  refusal_ = absl::OkStatus();
  seq_ = 1;
  Liveness::Watch alive = alive_.watch();
  stream_ = stub_->Connect(
      [this, alive, generation](v1::WorkerEvent& event) {
        if (alive) OnEvent(generation, event);
      },
      [this, alive, generation](absl::Status status) {
        if (alive) OnDone(generation, status);
      });
  v1::WorkerCommand hello;
  hello.set_seq(seq_);
  hello.mutable_hello()->set_client_name("omnistage-orchestrator");
  hello.mutable_hello()->set_protocol_version(kProtocolVersion);
  hello.mutable_hello()->set_expected_stage_id(options_.stage);
  if (options_.defaults.has_value())
    *hello.mutable_hello()->mutable_defaults() = *options_.defaults;
  hello.mutable_hello()->set_want_cache_events(options_.want_cache_events);
  (void)stream_->Write(std::move(hello));  // A broken stream reports itself in OnDone.
}

void ReplicaSession::OnEvent(uint64_t generation, v1::WorkerEvent& event) {
  if (generation != generation_) return;  // An earlier stream's leftovers.
  switch (event.event_case()) {
    case v1::WorkerEvent::kReady:
      ready_ = true;
      ready_event_ = event.ready();
      session_id_ = event.ready().session_id();
      max_message_bytes_ = event.ready().max_message_bytes();
      if (max_message_bytes_ > 0 && max_message_bytes_ < options_.needed_message_bytes) {
        LogWarning(
            {"", options_.stage, options_.replica, ""},
            absl::StrCat("accepts messages up to ", max_message_bytes_,
                         " bytes; the longest prompt limits.max_prompt_bytes admits needs ",
                         options_.needed_message_bytes, ": start it with --max_message_bytes=",
                         options_.needed_message_bytes, " or lower the limit"));
      }
      backoff_ = options_.reconnect_initial_backoff;
      listener_->OnReplicaReady(options_.stage, options_.replica, event.ready());
      return;
    case v1::WorkerEvent::kStep:
      listener_->OnStepOutputs(options_.stage, options_.replica, *event.mutable_step());
      return;
    case v1::WorkerEvent::kRejected:
      if (event.rejected().command() == v1::CommandRejected::KIND_HELLO) {
        refusal_ = StatusFromErrorProto(event.rejected().error());
        return;
      }
      listener_->OnCommandRejected(options_.stage, options_.replica, event.rejected());
      return;
    case v1::WorkerEvent::kUtilityResult: {
      auto it = utilities_.find(event.utility_result().call_id());
      if (it == utilities_.end()) return;  // Timed out already.
      auto done = std::move(it->second);
      utilities_.erase(it);
      const v1::UtilityResult& result = event.utility_result();
      if (result.has_error()) {
        done(StatusFromErrorProto(result.error()));
      } else {
        done(result.value());
      }
      return;
    }
    case v1::WorkerEvent::kFatal:
      fatal_reason_ = event.fatal().reason();
      return;
    case v1::WorkerEvent::kStalled:
      listener_->OnReplicaStalled(options_.stage, options_.replica, event.stalled());
      return;
    case v1::WorkerEvent::kRecovered:
      listener_->OnReplicaReady(options_.stage, options_.replica, ready_event_);
      return;
    case v1::WorkerEvent::kDraining: {
      listener_->OnReplicaDraining(options_.stage, options_.replica, event.draining());
      // The listener picks this replica no more: every Add for it was sent
      // before this, which lets the worker finish its drain early.
      v1::WorkerCommand ack;
      ack.mutable_drain_ack();
      (void)Send(ack);
      return;
    }
    case v1::WorkerEvent::EVENT_NOT_SET:
      return;
  }
}

void ReplicaSession::OnDone(uint64_t generation, const absl::Status& status) {
  if (generation != generation_) return;
  absl::Status reason;
  if (!refusal_.ok()) {
    reason = WithMessage(refusal_, absl::StrCat("refused the session: ", refusal_.message()));
  } else if (!fatal_reason_.empty()) {
    reason = absl::UnavailableError(absl::StrCat("fatal engine error: ", fatal_reason_));
  } else {
    reason = absl::UnavailableError(status.ok() ? "the worker closed the session"
                                                : std::string(status.message()));
  }
  stream_.reset();
  ready_ = false;
  FailUtilities(absl::UnavailableError(reason.message()));
  listener_->OnReplicaDown(options_.stage, options_.replica, reason);
  reconnect_timer_ = scheduler_->PostAfter(backoff_, [this, alive = alive_.watch()] {
    if (alive) Connect();
  });
  backoff_ = std::min(backoff_ * 2, options_.reconnect_max_backoff);
}

absl::Status ReplicaSession::Send(v1::WorkerCommand& command) {
  if (stream_ == nullptr || !ready_) return NotConnected();
  const size_t bytes = command.ByteSizeLong();
  if (max_message_bytes_ > 0 && bytes > static_cast<size_t>(max_message_bytes_)) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the command is ", bytes, " bytes; the worker accepts at most ", max_message_bytes_));
  }
  command.set_seq(seq_ + 1);
  // Write() moves from the command only when it queues it.
  if (absl::Status s = stream_->Write(std::move(command)); !s.ok()) return s;
  ++seq_;
  return absl::OkStatus();
}

absl::Status ReplicaSession::Add(v1::AddRequest* request) {
  v1::WorkerCommand command;
  command.mutable_add()->Swap(request);
  absl::Status status = Send(command);
  if (!status.ok()) command.mutable_add()->Swap(request);  // Hand it back untouched.
  return status;
}

absl::Status ReplicaSession::AppendInput(v1::AppendInput input) {
  v1::WorkerCommand command;
  *command.mutable_append_input() = std::move(input);
  return Send(command);
}

absl::Status ReplicaSession::SetPlaybackDeadlines(v1::PlaybackDeadlines deadlines) {
  v1::WorkerCommand command;
  *command.mutable_deadlines() = std::move(deadlines);
  return Send(command);
}

void ReplicaSession::CallUtility(
    const std::string& name, const google::protobuf::ListValue& args,
    std::function<void(absl::StatusOr<google::protobuf::Value>)> done) {
  const uint64_t call_id = next_call_id_++;
  v1::WorkerCommand command;
  command.mutable_utility()->set_call_id(call_id);
  command.mutable_utility()->set_name(name);
  *command.mutable_utility()->mutable_args() = args;
  if (absl::Status s = Send(command); !s.ok()) {
    done(s);
    return;
  }
  utilities_[call_id] = std::move(done);
  scheduler_->PostAfter(options_.utility_timeout, [this, alive = alive_.watch(), call_id] {
    if (!alive) return;
    auto it = utilities_.find(call_id);
    if (it == utilities_.end()) return;
    auto timed_out = std::move(it->second);
    utilities_.erase(it);
    timed_out(absl::DeadlineExceededError("utility call timed out"));
  });
}

void ReplicaSession::FailUtilities(const absl::Status& status) {
  auto pending = std::move(utilities_);
  utilities_.clear();
  for (auto& [id, done] : pending) done(status);
}

void ReplicaSession::Abort(const std::vector<std::string>& ids, absl::Time call_deadline,
                           AbortDone done) {
  if (stream_ == nullptr || !ready_) {
    done(NotConnected());
    return;
  }
  v1::WorkerAbortRequest request;
  request.set_session_id(session_id_);
  request.set_after_seq(seq_);
  for (const std::string& id : ids) request.add_request_ids(id);
  stub_->Abort(
      request, call_deadline,
      [done = std::move(done)](absl::StatusOr<v1::WorkerAbortResponse> result) {
        if (!result.ok()) {
          done(result.status());
          return;
        }
        done(std::vector<std::string>(result->aborted_ids().begin(), result->aborted_ids().end()));
      });
}

}  // namespace omnistage
