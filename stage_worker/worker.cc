#include "stage_worker/worker.h"

#include <unistd.h>

#include <algorithm>
#include <iostream>
#include <optional>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/synchronization/blocking_counter.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "common/error_proto.h"
#include "common/field_error.h"
#include "common/log.h"
#include "common/random_id.h"

namespace omnistage {
namespace {

std::string DefaultInstanceId() {
  return absl::StrCat(getpid(), "-", absl::Hex(absl::GetCurrentTimeNanos()));
}

absl::Status CheckRequestId(const std::string& id) {
  if (id.empty()) return absl::InvalidArgumentError("request_id is empty");
  if (id.size() > kMaxRequestIdBytes) {
    return absl::InvalidArgumentError(absl::StrCat("request_id is ", id.size(),
                                                   " bytes; the limit is ", kMaxRequestIdBytes));
  }
  return absl::OkStatus();
}

WorkerOptions WithInstanceId(WorkerOptions options) {
  if (options.instance_id.empty()) options.instance_id = DefaultInstanceId();
  return options;
}

}  // namespace

Worker::Worker(WorkerOptions options, std::unique_ptr<Engine> engine)
    : options_(WithInstanceId(std::move(options))),
      engine_(std::move(engine)),
      core_(engine_.get(), this),
      submit_([this](std::vector<CoreMessage> batch) { core_.SubmitAll(std::move(batch)); }),
      stall_(options_.stall,
             StallGuard::Hooks{[this] {
                                 absl::MutexLock lock(&mu_);
                                 return SessionsLocked();
                               },
                               [this](bool serving) { SetServing(serving); }, submit_}) {
  // Gauges of state other threads own, read when a scrape asks.
  metrics_registry_.OnRender([this] {
    metrics_.SetQueueDepth(core_.queue_depth());
    absl::MutexLock lock(&mu_);
    metrics_.SetSessions(sessions_.size());
  });
}

Worker::~Worker() {
  if (loop_.joinable()) {
    core_.RequestShutdown();
    loop_.join();
  }
}

void Worker::Start() {
  loop_ = std::thread([this] { core_.Run(); });
}

void Worker::RequestShutdown() { core_.RequestShutdown(); }

void Worker::set_on_serving(std::function<void(bool)> callback) {
  absl::MutexLock lock(&mu_);
  on_serving_ = std::move(callback);
}

void Worker::set_on_stall_exit(std::function<void(const absl::Status&)> callback) {
  stall_.set_on_exit(std::move(callback));
}

void Worker::SetServing(bool serving) {
  std::function<void(bool)> on_serving;
  {
    absl::MutexLock lock(&mu_);
    // Stopped or leaving for good: stays NOT_SERVING.
    if (!serving_ || draining_.has_value()) return;
    on_serving = on_serving_;
  }
  if (on_serving) on_serving(serving);
}

int Worker::Drain(absl::Duration timeout) {
  std::vector<std::shared_ptr<Session>> sessions;
  std::function<void(bool)> on_serving;
  v1::WorkerEvent event;
  event.mutable_draining()->set_drain_timeout_ms(absl::ToInt64Milliseconds(timeout));
  {
    absl::MutexLock lock(&mu_);
    draining_ = event;
    sessions = SessionsLocked();
    on_serving = on_serving_;
  }
  if (on_serving) on_serving(false);
  for (const auto& session : sessions) session->Send(event);
  LogInfo({"", options_.stage_id, -1, ""},
          absl::StrCat("draining: serving no new session, ", live_requests(),
                       " request(s) get up to ", absl::FormatDuration(timeout)));
  // Done early once nothing runs and no client will add more (each acknowledged
  // the drain or left).
  auto finished = [this] {
    if (live_requests() > 0) return false;
    absl::MutexLock lock(&mu_);
    for (const auto& [number, session] : sessions_) {
      if (!session->done_adding()) return false;
    }
    return true;
  };
  const absl::Time deadline = absl::Now() + timeout;
  while (!finished() && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(10));

  // What is left is stopped, each request ending on its session, before the
  // sessions end.
  int stopped = 0;
  std::vector<CoreMessage> aborts;
  {
    absl::MutexLock lock(&mu_);
    sessions = SessionsLocked();
  }
  std::vector<std::pair<std::shared_ptr<Session>, std::vector<std::string>>> left;
  for (const auto& session : sessions) {
    std::vector<std::string> ids = session->LiveIds();
    if (ids.empty()) continue;
    stopped += static_cast<int>(ids.size());
    left.emplace_back(session, std::move(ids));
  }
  if (left.empty()) {
    LogInfo({"", options_.stage_id, -1, ""}, "drained: every request ended");
    return 0;
  }
  absl::BlockingCounter done(static_cast<int>(left.size()));
  const std::string why = absl::StrCat("stopped when the worker's drain timeout (",
                                       absl::FormatDuration(timeout), ") passed");
  for (auto& [session, ids] : left) {
    std::vector<std::string> engine_ids;
    for (const std::string& id : ids) engine_ids.push_back(EngineRequestId(session->number(), id));
    aborts.push_back(CoreMessage::Abort(
        std::move(engine_ids), [session = session, ids = ids, why, &done](bool applied) {
          std::vector<std::string> ended = applied ? session->TakeLive(ids) : ids;
          if (applied && !ended.empty()) {
            session->Send(FinishedEvent(ended, v1::FINISH_REASON_ABORT, absl::AbortedError(why)));
          }
          done.DecrementCount();
        }));
  }
  core_.SubmitAll(std::move(aborts));
  done.Wait();
  LogWarning({"", options_.stage_id, -1, ""},
             absl::StrCat("drain timeout passed; stopped ", stopped, " request(s)"));
  return stopped;
}

absl::Status Worker::Wait() {
  if (loop_.joinable()) loop_.join();
  absl::MutexLock lock(&mu_);
  return result_;
}

size_t Worker::live_requests() const {
  std::vector<std::shared_ptr<Session>> sessions;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [number, session] : sessions_) sessions.push_back(session);
  }
  size_t live = 0;
  for (const auto& session : sessions) live += session->live_count();
  return live;
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
    EngineRequest probe;
    probe.id = "hello-defaults";
    probe.input_complete = false;
    probe.params = hello.defaults();
    absl::Status status = engine_->Validate(probe);
    if (!status.ok()) {
      const std::string field = ErrorField(status);
      absl::string_view within_params = field;
      absl::ConsumePrefix(&within_params, "params");
      absl::ConsumePrefix(&within_params, ".");
      return AtField(absl::InvalidArgumentError(
                         absl::StrCat("stage defaults: ", status.message())),
                     absl::StrCat("defaults", within_params.empty() ? "" : ".", within_params));
    }
  }
  absl::MutexLock lock(&mu_);
  return std::make_shared<Session>(next_session_++, peer, transport, hello_seq);
}

void Worker::StartSession(const std::shared_ptr<Session>& session) {
  // Ready is the session's first event: it is queued before the session is
  // registered, as every other event (a stall, a drain, a fatal error) goes to
  // registered sessions only.
  absl::Status stopped;
  {
    absl::MutexLock lock(&mu_);
    if (!serving_) stopped = stopped_;
  }
  if (!stopped.ok()) {
    session->End(stopped);
    return;
  }
  v1::WorkerEvent event;
  v1::Ready* ready = event.mutable_ready();
  ready->set_stage_id(options_.stage_id);
  ready->set_instance_id(options_.instance_id);
  ready->set_engine(options_.engine_name);
  ready->set_capacity(engine_->capacity());
  ready->set_session_id(session->id());
  ready->set_protocol_version(kProtocolVersion);
  ready->set_max_message_bytes(options_.max_message_bytes);
  session->Send(std::move(event));
  {
    absl::MutexLock lock(&mu_);
    if (serving_) {
      sessions_[session->number()] = session;
    } else {
      stopped = stopped_;  // It stopped just now.
    }
  }
  if (!stopped.ok()) {
    session->End(stopped);
    return;
  }
  LogInfo({"", options_.stage_id, -1, ""},
          absl::StrCat("session ", session->number(), " opened",
                       session->peer().empty() ? "" : absl::StrCat(" by '", session->peer(), "'")));
  if (std::optional<v1::WorkerEvent> stalled = stall_.StalledEvent()) {
    session->Send(*std::move(stalled));
  }
  std::optional<v1::WorkerEvent> draining;
  {
    absl::MutexLock lock(&mu_);
    draining = draining_;
  }
  if (draining.has_value()) session->Send(*std::move(draining));
}

void Worker::Reject(Session& session, const v1::WorkerCommand& command,
                    const std::string& request_id, const absl::Status& status) {
  // A rejected command still counts as applied for Abort's fence; a seq that
  // does not increase was rejected by the fence itself.
  (void)session.Sequence(command.seq(), std::nullopt, submit_);
  v1::WorkerEvent event;
  v1::CommandRejected* rejected = event.mutable_rejected();
  rejected->set_seq(command.seq());
  rejected->set_request_id(request_id);
  switch (command.command_case()) {
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
    case v1::WorkerCommand::COMMAND_NOT_SET:
      break;
  }
  *rejected->mutable_error() = ErrorProto(status, options_.stage_id, -1, options_.instance_id);
  LogWarning({request_id, options_.stage_id, -1, ""},
             absl::StrCat("rejected a command of session ", session.number(), ": ",
                          absl::StatusCodeToString(status.code()), ": ", status.message()));
  session.Send(std::move(event));
}

void Worker::HandleCommand(Session& session, v1::WorkerCommand& command) {
  switch (command.command_case()) {
    case v1::WorkerCommand::kAdd: {
      v1::AddRequest& add = *command.mutable_add();
      if (absl::Status s = CheckRequestId(add.request_id()); !s.ok()) {
        Reject(session, command, add.request_id(), s);
        return;
      }
      if (const uint64_t stalled = stall_.stalled_step(); stalled != 0) {
        Reject(session, command, add.request_id(),
               absl::UnavailableError(absl::StrCat("the engine is stalled in step ", stalled)));
        return;
      }
      EngineRequest request;
      request.id = EngineRequestId(session.number(), add.request_id());
      request.input.assign(std::make_move_iterator(add.mutable_input()->begin()),
                           std::make_move_iterator(add.mutable_input()->end()));
      request.input_complete = add.input_complete();
      request.params = std::move(*add.mutable_params());
      if (absl::Status s = engine_->Validate(request); !s.ok()) {
        Reject(session, command, add.request_id(), s);
        return;
      }
      const std::string trace_id = TraceIdOf(add.traceparent());
      if (!session.AddLive(add.request_id(), trace_id)) {
        Reject(session, command, add.request_id(),
               absl::AlreadyExistsError(absl::StrCat("request_id '", add.request_id(),
                                                     "' is already live in this session")));
        return;
      }
      Log(LogLevel::kDebug, {add.request_id(), options_.stage_id, -1, trace_id},
          absl::StrCat("added (session ", session.number(), ", ", request.input.size(),
                       " input payload(s)", request.input_complete ? ")" : ", more to come)"));
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
      absl::Status s = session.Sequence(
          command.seq(), CoreMessage::Add(std::move(request), std::move(taken)), submit_);
      if (!s.ok()) {
        session.EraseLive(add.request_id());
        Reject(session, command, add.request_id(), s);
      }
      return;
    }
    case v1::WorkerCommand::kAppendInput: {
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
      return;
    }
    case v1::WorkerCommand::kUtility: {
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
      return;
    }
    case v1::WorkerCommand::kDrainAck:
      session.MarkDrainAcked();
      (void)session.Sequence(command.seq(), std::nullopt, submit_);
      return;
    case v1::WorkerCommand::kHello:
      Reject(session, command, "", absl::InvalidArgumentError("hello already received"));
      return;
    case v1::WorkerCommand::COMMAND_NOT_SET:
      Reject(session, command, "", absl::InvalidArgumentError("command has no content"));
      return;
  }
}

void Worker::CloseSession(Session& session) {
  std::vector<CoreMessage> released;
  const bool was_closed = session.closed();
  std::vector<std::string> ids = session.Close(&released);
  if (!was_closed) {
    LogInfo({"", options_.stage_id, -1, ""},
            absl::StrCat("session ", session.number(), " closed; aborting its ", ids.size(),
                         " live request(s)"));
  }
  {
    absl::MutexLock lock(&mu_);
    sessions_.erase(session.number());
  }
  std::vector<CoreMessage> batch;
  if (!ids.empty()) {
    for (std::string& id : ids) id = EngineRequestId(session.number(), id);
    batch.push_back(CoreMessage::Abort(std::move(ids)));
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
  auto on_applied = [session, ids = std::move(ids), done = std::move(done)](bool applied) {
    if (!applied) {
      done(absl::UnavailableError("the worker's engine loop has stopped"));
      return;
    }
    std::vector<std::string> aborted = session->TakeLive(ids);
    if (!aborted.empty()) {
      session->Send(FinishedEvent(aborted, v1::FINISH_REASON_ABORT,
                                  absl::AbortedError("stopped by an Abort call")));
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

void Worker::OnStepOutputs(uint64_t step, std::vector<v1::RequestOutput> outputs) {
  // One event per session per step; most steps touch one or two sessions.
  std::vector<std::pair<std::shared_ptr<Session>, v1::WorkerEvent>> events;
  {
    absl::MutexLock lock(&mu_);
    for (v1::RequestOutput& output : outputs) {
      uint64_t number;
      std::string request_id;
      if (!ParseEngineRequestId(output.request_id(), &number, &request_id)) continue;
      auto it = std::find_if(events.begin(), events.end(),
                             [&](const auto& e) { return e.first->number() == number; });
      if (it == events.end()) {
        std::shared_ptr<Session> session = FindSessionLocked(number);
        if (session == nullptr) continue;  // Closed: its requests are being aborted.
        events.emplace_back(std::move(session), v1::WorkerEvent());
        events.back().second.mutable_step()->set_step(step);
        it = events.end() - 1;
      }
      output.set_request_id(std::move(request_id));
      *it->second.mutable_step()->add_outputs() = std::move(output);
    }
  }
  for (auto& [session, event] : events) {
    // Forget finished ids before the client can see them finish and reuse them.
    for (const v1::RequestOutput& output : event.step().outputs()) {
      if (!output.finished()) continue;
      const LogContext context{output.request_id(), options_.stage_id, -1,
                               session->EraseLive(output.request_id())};
      if (output.finish_reason() == v1::FINISH_REASON_ERROR) {
        LogWarning(context, absl::StrCat("failed in the engine: ", output.error().message()));
      } else {
        Log(LogLevel::kDebug, context,
            absl::StrCat("finished: ", v1::FinishReason_Name(output.finish_reason())));
      }
    }
    session->Send(std::move(event));
  }
}

void Worker::OnUtilityResult(uint64_t call_id,
                             absl::StatusOr<google::protobuf::Value> result) {
  metrics_.UtilityDone(result.ok());
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
    *out->mutable_error() =
        ErrorProto(result.status(), options_.stage_id, -1, options_.instance_id);
  }
  pending.session->Send(std::move(event));
}

void Worker::OnShutdown() {
  StopServing(absl::UnavailableError("stage worker is shutting down"), nullptr);
}

void Worker::OnFatal(const absl::Status& reason) {
  LogError({"", options_.stage_id, -1, ""},
           absl::StrCat("fatal engine error: ", reason.message(), "; ending every session"));
  {
    absl::MutexLock lock(&mu_);
    result_ = reason;
  }
  v1::WorkerEvent event;
  event.mutable_fatal()->set_reason(std::string(reason.message()));
  StopServing(absl::UnavailableError(absl::StrCat("stage worker failed: ", reason.message())),
              &event);
}

void Worker::StopServing(const absl::Status& status, const v1::WorkerEvent* last_event) {
  std::vector<std::shared_ptr<Session>> sessions;
  std::function<void(bool)> on_serving;
  {
    absl::MutexLock lock(&mu_);
    serving_ = false;
    stopped_ = status;
    sessions = SessionsLocked();
    utilities_.clear();
    on_serving = on_serving_;
  }
  if (on_serving) on_serving(false);
  for (const auto& session : sessions) {
    if (last_event != nullptr) session->Send(*last_event);
    session->End(status);
  }
}

std::vector<std::shared_ptr<Session>> Worker::SessionsLocked() const {
  std::vector<std::shared_ptr<Session>> sessions;
  sessions.reserve(sessions_.size());
  for (const auto& [number, session] : sessions_) sessions.push_back(session);
  return sessions;
}

}  // namespace omnistage
