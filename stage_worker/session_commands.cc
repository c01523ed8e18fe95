#include "stage_worker/session_commands.h"

#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/error_proto.h"
#include "common/field_error.h"
#include "common/limits.h"
#include "common/tracing/trace_context.h"

namespace omnistage {
namespace {

// AddRequest.produced is what a continuation continues after; any other engine
// would ignore it and produce the whole output again, which the client would
// then receive twice.
absl::Status CheckProduced(const v1::AddRequest& add, ResumeMode mode) {
  if (add.produced().empty() || mode == ResumeMode::kContinuation) return absl::OkStatus();
  return AtField(
      absl::InvalidArgumentError(absl::StrCat(
          "produced is only for an engine that resumes by continuation; this worker's engine ",
          mode == ResumeMode::kReplay ? "resumes by replay (send the whole input again instead)"
                                      : "cannot resume a request")),
      "produced");
}

}  // namespace

absl::Status CheckRequestId(const std::string& id) {
  if (id.empty()) return absl::InvalidArgumentError("request_id is empty");
  if (id.size() > kMaxRequestIdBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("request_id is ", id.size(), " bytes; the limit is ", kMaxRequestIdBytes));
  }
  return absl::OkStatus();
}

SessionCommands::SessionCommands(Worker worker) : worker_(std::move(worker)) {}

void SessionCommands::Reject(ConnectSession& session, const v1::WorkerCommand& command,
                             const std::string& request_id, const absl::Status& status) {
  // A rejected command still counts as applied for Abort's fence; a seq that
  // does not increase was rejected by the fence itself.
  (void)session.Sequence(command.seq(), std::nullopt, worker_.submit);
  SendRejected(session, command.seq(), command.command_case(), request_id, status);
}

void SessionCommands::SendRejected(ConnectSession& session, uint64_t seq,
                                   v1::WorkerCommand::CommandCase command,
                                   const std::string& request_id, const absl::Status& status) {
  v1::WorkerEvent event;
  v1::CommandRejected* rejected = event.mutable_rejected();
  rejected->set_seq(seq);
  rejected->set_request_id(request_id);
  switch (command) {
    case v1::WorkerCommand::kHello:
      rejected->set_command(v1::CommandRejected::KIND_HELLO);
      break;
    case v1::WorkerCommand::kAdd:
      rejected->set_command(v1::CommandRejected::KIND_ADD);
      break;
    case v1::WorkerCommand::kAppendInput:
      rejected->set_command(v1::CommandRejected::KIND_APPEND_INPUT);
      break;
    case v1::WorkerCommand::kUtility:
      rejected->set_command(v1::CommandRejected::KIND_UTILITY);
      break;
    case v1::WorkerCommand::kDrainAck:   // Never rejected.
    case v1::WorkerCommand::kDeadlines:  // Nor this, but for its seq.
    case v1::WorkerCommand::kBatch:      // Its commands are, one by one.
    case v1::WorkerCommand::COMMAND_NOT_SET:
      break;
  }
  *rejected->mutable_error() = ErrorProto(status, worker_.stage_id, -1, worker_.instance_id);
  LogWarning(SessionContext(worker_.log_context, session, request_id),
             absl::StrCat("rejected a command: ", absl::StatusCodeToString(status.code()), ": ",
                          status.message()));
  session.Send(std::move(event));
}

void SessionCommands::Handle(ConnectSession& session, v1::WorkerCommand& command) {
  switch (command.command_case()) {
    case v1::WorkerCommand::kAdd:
      HandleAdd(session, command);
      return;
    case v1::WorkerCommand::kAppendInput:
      HandleAppendInput(session, command);
      return;
    case v1::WorkerCommand::kUtility:
      HandleUtility(session, command);
      return;
    case v1::WorkerCommand::kDeadlines:
      HandleDeadlines(session, command);
      return;
    case v1::WorkerCommand::kDrainAck:
      session.MarkDrainAcked();
      (void)session.Sequence(command.seq(), std::nullopt, worker_.submit);
      return;
    case v1::WorkerCommand::kHello:
      Reject(session, command, "", absl::InvalidArgumentError("hello already received"));
      return;
    case v1::WorkerCommand::kBatch:
      for (v1::WorkerCommand& inner : *command.mutable_batch()->mutable_commands()) {
        if (inner.has_batch()) {
          Reject(session, inner, "", absl::InvalidArgumentError("a batch inside a batch"));
          continue;
        }
        Handle(session, inner);
      }
      return;
    case v1::WorkerCommand::COMMAND_NOT_SET:
      Reject(session, command, "", absl::InvalidArgumentError("command has no content"));
      return;
  }
}

absl::StatusOr<EngineRequest> SessionCommands::AcceptAdd(const ConnectSession& session,
                                                         v1::AddRequest& add) {
  if (absl::Status s = CheckRequestId(add.request_id()); !s.ok()) return s;
  if (const uint64_t stalled = worker_.stalled_step(); stalled != 0) {
    return absl::UnavailableError(absl::StrCat("the engine is stalled in step ", stalled));
  }
  if (absl::Status s = CheckProduced(add, worker_.engine->resume_mode()); !s.ok()) return s;
  if (!add.input_complete() && worker_.engine->streamed_input() == StreamedInput::kNone) {
    return absl::FailedPreconditionError(
        "this engine takes no streamed input (Ready.streamed_input is NONE); send the whole "
        "input with input_complete");
  }
  EngineRequest request;
  request.id = EngineRequestId(session.number(), add.request_id());
  request.input.assign(std::make_move_iterator(add.mutable_input()->begin()),
                       std::make_move_iterator(add.mutable_input()->end()));
  request.input_complete = add.input_complete();
  request.params = std::move(*add.mutable_params());
  request.produced.assign(std::make_move_iterator(add.mutable_produced()->begin()),
                          std::make_move_iterator(add.mutable_produced()->end()));
  if (absl::Status s = worker_.engine->Validate(request); !s.ok()) return s;
  return request;
}

void SessionCommands::HandleAdd(ConnectSession& session, v1::WorkerCommand& command) {
  v1::AddRequest& add = *command.mutable_add();
  absl::StatusOr<EngineRequest> accepted = AcceptAdd(session, add);
  if (!accepted.ok()) {
    Reject(session, command, add.request_id(), accepted.status());
    return;
  }
  EngineRequest& request = *accepted;
  const std::string trace_id = TraceIdOf(add.traceparent());
  if (!session.AddLive(add.request_id(), trace_id)) {
    Reject(session, command, add.request_id(),
           absl::AlreadyExistsError(absl::StrCat("request_id '", add.request_id(),
                                                 "' is already live in this session")));
    return;
  }
  RequestSpans* spans = worker_.spans;
  if (spans != nullptr) {
    spans->Added(session.number(), add.request_id(), add.traceparent(), add.tracestate());
  }
  Log(LogLevel::kDebug, SessionContext(worker_.log_context, session, add.request_id(), trace_id),
      absl::StrCat("added (", request.input.size(), " input payload(s)",
                   request.input_complete ? ")" : ", more to come)"));
  // An abort of the id that the loop applies before this Add did not stop
  // it: the session must know which of its live requests the engine holds.
  std::shared_ptr<ConnectSession> owner = worker_.find_session(session.number());
  auto taken = [owner, spans, id = add.request_id()] {
    if (owner == nullptr) return;
    owner->MarkTaken(id);
    if (spans != nullptr) spans->Taken(owner->number(), id);
  };
  // The engine's check on the loop refused it: it never started.
  auto rejected = [this, owner, spans, id = add.request_id(),
                   seq = command.seq()](const absl::Status& status) {
    if (owner == nullptr) return;
    owner->EraseLive(id);
    if (spans != nullptr) {
      spans->Ended(owner->number(), id, v1::FINISH_REASON_ERROR, std::string(status.message()));
    }
    SendRejected(*owner, seq, v1::WorkerCommand::kAdd, id, status);
  };
  absl::Status s = session.Sequence(
      command.seq(), CoreMessage::Add(std::move(request), std::move(taken), std::move(rejected)),
      worker_.submit);
  if (!s.ok()) {
    session.EraseLive(add.request_id());
    if (spans != nullptr) {
      spans->Ended(session.number(), add.request_id(), v1::FINISH_REASON_ERROR,
                   std::string(s.message()));
    }
    Reject(session, command, add.request_id(), s);
  }
}

void SessionCommands::HandleAppendInput(ConnectSession& session, v1::WorkerCommand& command) {
  v1::AppendInput& append = *command.mutable_append_input();
  if (absl::Status s = CheckRequestId(append.request_id()); !s.ok()) {
    Reject(session, command, append.request_id(), s);
    return;
  }
  std::vector<v1::Payload> chunks(std::make_move_iterator(append.mutable_chunks()->begin()),
                                  std::make_move_iterator(append.mutable_chunks()->end()));
  // Ids that already finished or were aborted are ignored by the engine: an
  // upstream chunk may legitimately race with the request's end.
  absl::Status s = session.Sequence(
      command.seq(),
      CoreMessage::AppendInput(EngineRequestId(session.number(), append.request_id()),
                               std::move(chunks), append.last()),
      worker_.submit);
  if (!s.ok()) Reject(session, command, append.request_id(), s);
}

void SessionCommands::HandleDeadlines(ConnectSession& session, v1::WorkerCommand& command) {
  // Slack counts from now: the orchestrator's clock is not this one.
  const absl::Time now = absl::Now();
  std::vector<std::pair<std::string, absl::Time>> deadlines;
  for (const v1::PlaybackDeadline& d : command.deadlines().deadlines()) {
    if (!CheckRequestId(d.request_id()).ok()) continue;  // Names nothing the engine holds.
    deadlines.emplace_back(EngineRequestId(session.number(), d.request_id()),
                           now + absl::Milliseconds(d.slack_ms()));
  }
  absl::Status s =
      session.Sequence(command.seq(), CoreMessage::Deadlines(std::move(deadlines)), worker_.submit);
  if (!s.ok()) Reject(session, command, "", s);
}

void SessionCommands::HandleUtility(ConnectSession& session, v1::WorkerCommand& command) {
  v1::UtilityCall& call = *command.mutable_utility();
  const uint64_t internal_id = next_call_id_.fetch_add(1);
  {
    absl::MutexLock lock(&mu_);
    utilities_[internal_id] =
        PendingUtility{worker_.find_session(session.number()), call.call_id()};
  }
  // If the loop has ended, the session is being ended with the reason.
  absl::Status s = session.Sequence(
      command.seq(),
      CoreMessage::Utility(internal_id, call.name(), std::move(*call.mutable_args())),
      worker_.submit);
  if (!s.ok()) {
    {
      absl::MutexLock lock(&mu_);
      utilities_.erase(internal_id);
    }
    Reject(session, command, "", s);
  }
}

void SessionCommands::UtilityDone(uint64_t call_id,
                                  absl::StatusOr<google::protobuf::Value> result) {
  PendingUtility pending;
  {
    absl::MutexLock lock(&mu_);
    auto it = utilities_.find(call_id);
    if (it == utilities_.end()) return;
    pending = std::move(it->second);
    utilities_.erase(it);
  }
  if (pending.session == nullptr) return;
  v1::WorkerEvent event;
  v1::UtilityResult* out = event.mutable_utility_result();
  out->set_call_id(pending.client_call_id);
  if (result.ok()) {
    *out->mutable_value() = *std::move(result);
  } else {
    *out->mutable_error() = ErrorProto(result.status(), worker_.stage_id, -1, worker_.instance_id);
  }
  pending.session->Send(std::move(event));
}

void SessionCommands::ForgetUtilities() {
  absl::MutexLock lock(&mu_);
  utilities_.clear();
}

}  // namespace omnistage
