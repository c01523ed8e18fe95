// The Worker's sessions (worker.h): the commands of a session, its end, and
// the unary Abort fenced against its commands. A session's opening (the Hello
// and Ready) is in worker_hello.cc; the worker's lifecycle (start, serving,
// drain, outputs, stop) in worker.cc.
#include <optional>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/error_proto.h"
#include "common/field_error.h"
#include "common/log.h"
#include "common/random_id.h"
#include "stage_worker/worker.h"

namespace omnistage {
namespace {

absl::Status CheckRequestId(const std::string& id) {
  if (id.empty()) return absl::InvalidArgumentError("request_id is empty");
  if (id.size() > kMaxRequestIdBytes) {
    return absl::InvalidArgumentError(absl::StrCat("request_id is ", id.size(),
                                                   " bytes; the limit is ", kMaxRequestIdBytes));
  }
  return absl::OkStatus();
}

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

void Worker::Reject(Session& session, const v1::WorkerCommand& command,
                    const std::string& request_id, const absl::Status& status) {
  // A rejected command still counts as applied for Abort's fence; a seq that
  // does not increase was rejected by the fence itself.
  (void)session.Sequence(command.seq(), std::nullopt, submit_);
  SendRejected(session, command.seq(), command.command_case(), request_id, status);
}

void Worker::SendRejected(Session& session, uint64_t seq, v1::WorkerCommand::CommandCase command,
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
    case v1::WorkerCommand::kDrainAck:  // Never rejected.
    case v1::WorkerCommand::kBatch:      // Its commands are, one by one.
    case v1::WorkerCommand::COMMAND_NOT_SET:
      break;
  }
  *rejected->mutable_error() = ErrorProto(status, options_.stage_id, -1, options_.instance_id);
  LogWarning(ContextOf(session, request_id),
             absl::StrCat("rejected a command: ", absl::StatusCodeToString(status.code()), ": ",
                          status.message()));
  session.Send(std::move(event));
}

void Worker::HandleCommand(Session& session, v1::WorkerCommand& command) {
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
    case v1::WorkerCommand::kDrainAck:
      session.MarkDrainAcked();
      (void)session.Sequence(command.seq(), std::nullopt, submit_);
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
        HandleCommand(session, inner);
      }
      return;
    case v1::WorkerCommand::COMMAND_NOT_SET:
      Reject(session, command, "", absl::InvalidArgumentError("command has no content"));
      return;
  }
}

absl::StatusOr<EngineRequest> Worker::AcceptAdd(const Session& session, v1::AddRequest& add) {
  if (absl::Status s = CheckRequestId(add.request_id()); !s.ok()) return s;
  if (const uint64_t stalled = stall_.stalled_step(); stalled != 0) {
    return absl::UnavailableError(absl::StrCat("the engine is stalled in step ", stalled));
  }
  if (absl::Status s = CheckProduced(add, engine_->resume_mode()); !s.ok()) return s;
  if (!add.input_complete() && engine_->streamed_input() == StreamedInput::kNone) {
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
  if (absl::Status s = engine_->Validate(request); !s.ok()) return s;
  return request;
}

void Worker::HandleAdd(Session& session, v1::WorkerCommand& command) {
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
  Log(LogLevel::kDebug, ContextOf(session, add.request_id(), trace_id),
      absl::StrCat("added (", request.input.size(), " input payload(s)",
                   request.input_complete ? ")" : ", more to come)"));
  // An abort of the id that the loop applies before this Add did not stop
  // it: the session must know which of its live requests the engine holds.
  std::shared_ptr<Session> owner;
  {
    absl::MutexLock lock(&mu_);
    owner = FindSessionLocked(session.number());
  }
  auto taken = [owner, id = add.request_id()] {
    if (owner != nullptr) owner->MarkTaken(id);
  };
  // The engine's check on the loop refused it: it never started.
  auto rejected = [this, owner, id = add.request_id(),
                   seq = command.seq()](const absl::Status& status) {
    if (owner == nullptr) return;
    owner->EraseLive(id);
    SendRejected(*owner, seq, v1::WorkerCommand::kAdd, id, status);
  };
  absl::Status s = session.Sequence(
      command.seq(),
      CoreMessage::Add(std::move(request), std::move(taken), std::move(rejected)), submit_);
  if (!s.ok()) {
    session.EraseLive(add.request_id());
    Reject(session, command, add.request_id(), s);
  }
}

void Worker::HandleAppendInput(Session& session, v1::WorkerCommand& command) {
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
      submit_);
  if (!s.ok()) Reject(session, command, append.request_id(), s);
}

void Worker::HandleUtility(Session& session, v1::WorkerCommand& command) {
  v1::UtilityCall& call = *command.mutable_utility();
  const uint64_t internal_id = next_call_id_.fetch_add(1);
  {
    absl::MutexLock lock(&mu_);
    utilities_[internal_id] = PendingUtility{FindSessionLocked(session.number()),
                                             call.call_id()};
  }
  // If the loop has ended, the session is being ended with the reason.
  absl::Status s = session.Sequence(
      command.seq(),
      CoreMessage::Utility(internal_id, call.name(), std::move(*call.mutable_args())),
      submit_);
  if (!s.ok()) {
    {
      absl::MutexLock lock(&mu_);
      utilities_.erase(internal_id);
    }
    Reject(session, command, "", s);
  }
}

void Worker::CloseSession(Session& session) {
  std::vector<CoreMessage> released;
  const bool was_closed = session.closed();
  std::vector<std::string> ids = session.Close(&released);
  if (!was_closed) {
    LogInfo(ContextOf(session),
            absl::StrCat("session closed; aborting its ", ids.size(), " live request(s)"));
  }
  {
    absl::MutexLock lock(&mu_);
    sessions_.erase(session.number());
  }
  cache_reports_.Leave(session.number());
  std::vector<CoreMessage> batch;
  if (!ids.empty()) {
    for (std::string& id : ids) id = EngineRequestId(session.number(), id);
    // The other sessions hear that the load fell, even when no step follows.
    batch.push_back(CoreMessage::Abort(std::move(ids), [this](bool applied) {
      if (applied) BroadcastLoad(0, static_cast<int>(live_requests()));
    }));
  }
  for (CoreMessage& m : released) batch.push_back(std::move(m));
  if (!batch.empty()) core_.SubmitAll(std::move(batch));
}

void Worker::Abort(const v1::WorkerAbortRequest& request,
                   std::function<void(absl::StatusOr<std::vector<std::string>>)> done,
                   const std::string& peer) {
  for (const std::string& id : request.request_ids()) {
    if (absl::Status s = CheckRequestId(id); !s.ok()) {
      done(absl::InvalidArgumentError(absl::StrCat("request_ids: ", s.message())));
      return;
    }
  }
  uint64_t number = 0;
  std::shared_ptr<Session> session;
  bool existed = false;
  const absl::string_view id = request.session_id();
  if (absl::SimpleAtoi(id.substr(0, id.find('-')), &number)) {
    absl::MutexLock lock(&mu_);
    session = FindSessionLocked(number);
    existed = number > 0 && number < next_session_;
  }
  // The whole id, from whoever opened the session: a number alone, or another
  // client's id, finds nothing (and is told nothing more).
  if (session != nullptr && (!SameSecret(session->id(), id) || session->peer() != peer)) {
    session = nullptr;
    existed = false;
  }
  if (session == nullptr) {
    if (existed) {
      done(std::vector<std::string>());  // Closed: its requests were all aborted.
    } else {
      done(absl::NotFoundError(absl::StrCat("unknown session '", request.session_id(), "'")));
    }
    return;
  }
  std::vector<std::string> ids(request.request_ids().begin(), request.request_ids().end());
  std::vector<std::string> engine_ids;
  engine_ids.reserve(ids.size());
  for (const std::string& id : ids) engine_ids.push_back(EngineRequestId(number, id));
  // Runs on the loop thread right after the engine applied the abort (or at once
  // with false if the loop has ended). Which ids were live is decided there, in
  // order with the step outputs that retire finished requests, and each of them
  // ends on its session with one finished ABORT output: every request added on a
  // session ends there exactly once, whoever stopped it.
  auto on_applied = [this, session, ids = std::move(ids), done = std::move(done)](bool applied) {
    if (!applied) {
      done(absl::UnavailableError("the worker's engine loop has stopped"));
      return;
    }
    std::vector<std::string> aborted = session->TakeLive(ids);
    if (!aborted.empty()) {
      session->Send(FinishedEvent(aborted, v1::FINISH_REASON_ABORT,
                                  absl::AbortedError("stopped by an Abort call")));
      BroadcastLoad(0, static_cast<int>(live_requests()));
    }
    done(std::move(aborted));
  };
  session->Fence(request.after_seq(), CoreMessage::Abort(std::move(engine_ids), on_applied),
                 submit_);
}

std::shared_ptr<Session> Worker::FindSessionLocked(uint64_t number) const {
  auto it = sessions_.find(number);
  return it == sessions_.end() ? nullptr : it->second;
}

}  // namespace omnistage
