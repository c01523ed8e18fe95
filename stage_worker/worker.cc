#include "stage_worker/worker.h"

#include <unistd.h>

#include <algorithm>
#include <iostream>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/blocking_counter.h"
#include "absl/time/clock.h"
#include "common/allocator.h"
#include "common/error_proto.h"
#include "common/log.h"
#include "common/random_id.h"

namespace omnistage {
namespace {

std::string DefaultInstanceId() {
  return absl::StrCat(getpid(), "-", absl::Hex(absl::GetCurrentTimeNanos()));
}

WorkerOptions WithInstanceId(WorkerOptions options) {
  if (options.instance_id.empty()) options.instance_id = DefaultInstanceId();
  return options;
}

LogContext WorkerContext(const WorkerOptions& options) {
  LogContext context;
  context.stage = options.stage_id;
  context.instance = options.instance_id;
  return context;
}

}  // namespace

Worker::Worker(WorkerOptions options, std::unique_ptr<Engine> engine)
    : options_(WithInstanceId(std::move(options))),
      log_context_(WorkerContext(options_)),
      engine_(std::move(engine)),
      cache_layout_(engine_->prefix_cache()),
      cache_reports_(cache_layout_.capacity_blocks),
      core_(engine_.get(), this),
      submit_([this](std::vector<CoreMessage> batch) { core_.SubmitAll(std::move(batch)); }),
      spans_(options_.tracer.get(),
             {options_.stage_id, options_.instance_id, options_.engine_name}),
      stall_(options_.stall,
             StallGuard::Hooks{
                 [this](absl::FunctionRef<void(const std::vector<std::shared_ptr<ConnectSession>>&)>
                            with) {
                   absl::MutexLock lock(&mu_);
                   with(SessionsLocked());
                 },
                 [this](bool serving) { SetServing(serving); }, submit_, &spans_},
             log_context_),
      commands_(SessionCommands::Worker{
          options_.stage_id, options_.instance_id, log_context_, engine_.get(), submit_,
          [this] { return stall_.stalled_step(); },
          [this](uint64_t number) { return FindSession(number); }, &spans_}) {
  if (cache_layout_.block_tokens > 0) metrics_.AddPrefixCache(cache_layout_);
  AddHeapMetrics(&metrics_registry_);
  // Gauges of state other threads own, read when a scrape asks.
  metrics_registry_.OnRender([this] {
    metrics_.SetQueueDepth(core_.queue_depth());
    absl::MutexLock lock(&mu_);
    metrics_.SetSessions(sessions_.size());
  });
}

Worker::~Worker() {
  // What outlives the worker (its sessions' streams) reaches it no more, and
  // no call from one is still running in it.
  revocable_->Revoke();
  core_.RequestShutdown();
  if (loop_.joinable()) {
    loop_.join();
  } else if (!started_) {
    // Never started: the loop ends here at once, answering what was queued
    // and ending every session, as a started one does.
    core_.Run();
  }
}

void Worker::Start() {
  started_ = true;
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
  std::vector<std::shared_ptr<ConnectSession>> sessions;
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
  LogInfo(log_context_, absl::StrCat("draining: serving no new session, ", live_requests(),
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
  std::vector<std::pair<std::shared_ptr<ConnectSession>, std::vector<std::string>>> left;
  for (const auto& session : sessions) {
    std::vector<std::string> ids = session->LiveIds();
    if (ids.empty()) continue;
    stopped += static_cast<int>(ids.size());
    left.emplace_back(session, std::move(ids));
  }
  if (left.empty()) {
    LogInfo(log_context_, "drained: every request ended");
    return 0;
  }
  absl::BlockingCounter done(static_cast<int>(left.size()));
  const std::string why = absl::StrCat("stopped when the worker's drain timeout (",
                                       absl::FormatDuration(timeout), ") passed");
  for (auto& [session, ids] : left) {
    std::vector<std::string> engine_ids;
    for (const std::string& id : ids) engine_ids.push_back(EngineRequestId(session->number(), id));
    aborts.push_back(CoreMessage::Abort(
        std::move(engine_ids),
        [session = session, ids = ids, why, &done, spans = &spans_](bool applied) {
          std::vector<std::string> ended = applied ? session->TakeLive(ids) : ids;
          for (const std::string& id : ended) {
            spans->Ended(session->number(), id, v1::FINISH_REASON_ABORT, "");
          }
          if (applied && !ended.empty()) {
            session->Send(FinishedEvent(ended, v1::FINISH_REASON_ABORT, absl::AbortedError(why)));
          }
          done.DecrementCount();
        }));
  }
  core_.SubmitAll(std::move(aborts));
  done.Wait();
  LogWarning(log_context_, absl::StrCat("drain timeout passed; stopped ", stopped, " request(s)"));
  return stopped;
}

absl::Status Worker::Wait() {
  if (loop_.joinable()) loop_.join();
  absl::MutexLock lock(&mu_);
  return result_;
}

size_t Worker::live_requests() const {
  std::vector<std::shared_ptr<ConnectSession>> sessions;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [number, session] : sessions_) sessions.push_back(session);
  }
  size_t live = 0;
  for (const auto& session : sessions) live += session->live_count();
  return live;
}

void Worker::OnStepped(absl::Duration took, size_t outputs, EngineLoad load) {
  metrics_.Stepped(took, outputs, load);
  if (cache_layout_.block_tokens > 0) {
    metrics_.SetPrefixCache(engine_->prefix_cache_stats());
    cache_reports_.Apply(engine_->TakeCacheChanges());
  }
}

void Worker::OnStepOutputs(uint64_t step, std::vector<v1::RequestOutput> outputs) {
  // One event per session per step; most steps touch one or two sessions.
  std::vector<std::pair<std::shared_ptr<ConnectSession>, v1::WorkerEvent>> events;
  {
    absl::MutexLock lock(&mu_);
    for (v1::RequestOutput& output : outputs) {
      uint64_t number;
      std::string request_id;
      if (!ParseEngineRequestId(output.request_id(), &number, &request_id)) continue;
      auto it = std::find_if(events.begin(), events.end(),
                             [&](const auto& e) { return e.first->number() == number; });
      if (it == events.end()) {
        std::shared_ptr<ConnectSession> session = FindSessionLocked(number);
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
      spans_.Output(session->number(), output);
      if (!output.finished()) continue;
      const LogContext context = SessionContext(log_context_, *session, output.request_id(),
                                                session->EraseLive(output.request_id()));
      if (output.finish_reason() == v1::FINISH_REASON_ERROR) {
        LogWarning(context, absl::StrCat("failed in the engine: ", output.error().message()));
      } else {
        Log(LogLevel::kDebug, context,
            absl::StrCat("finished: ", v1::FinishReason_Name(output.finish_reason())));
      }
    }
  }
  // Every session hears the load after this step (orchestrators sharing this
  // worker pick by it), and the cache's changes if it asked for them: with its
  // outputs, or alone when only others had some.
  const int load = static_cast<int>(live_requests());
  for (auto& [session, event] : events) {
    v1::WorkerLoad* worker_load = event.mutable_step()->mutable_load();
    worker_load->set_requests(load);
    if (std::optional<v1::CacheEvents> cache = TakeCacheReport(*session)) {
      *worker_load->mutable_cache() = *std::move(cache);
    }
    session->set_reported_load(load);
    session->Send(std::move(event));
  }
  BroadcastLoad(step, load);
  // Backpressure: no next step while a session's client is behind (bounded; a
  // stuck client is waited for at most ConnectSession::kReaderProgressTimeout).
  const absl::Time deadline = absl::Now() + kMaxReaderWait;
  absl::Duration waited;
  for (const auto& [session, event] : events) waited += session->WaitForReader(deadline);
  if (waited > absl::ZeroDuration()) metrics_.WaitedForReaders(waited);
}

void Worker::BroadcastLoad(uint64_t step, int load) {
  std::vector<std::shared_ptr<ConnectSession>> sessions;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [number, session] : sessions_) sessions.push_back(session);
  }
  for (const auto& session : sessions) {
    std::optional<v1::CacheEvents> cache = TakeCacheReport(*session);
    if (session->reported_load() == load && !cache.has_value()) continue;
    v1::WorkerEvent event;
    event.mutable_step()->set_step(step);
    v1::WorkerLoad* worker_load = event.mutable_step()->mutable_load();
    worker_load->set_requests(load);
    if (cache.has_value()) *worker_load->mutable_cache() = *std::move(cache);
    session->set_reported_load(load);
    session->Send(std::move(event));
  }
}

std::optional<v1::CacheEvents> Worker::TakeCacheReport(const ConnectSession& session) {
  if (!session.wants_cache_events()) return std::nullopt;
  return cache_reports_.Take(session.number());
}

void Worker::OnUtilityResult(uint64_t call_id, absl::StatusOr<google::protobuf::Value> result) {
  metrics_.UtilityDone(result.ok());
  commands_.UtilityDone(call_id, std::move(result));
}

void Worker::OnShutdown() {
  StopServing(absl::UnavailableError("stage worker is shutting down"), nullptr);
}

void Worker::OnFatal(const absl::Status& reason) {
  LogError(log_context_,
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
  std::vector<std::shared_ptr<ConnectSession>> sessions;
  std::function<void(bool)> on_serving;
  {
    absl::MutexLock lock(&mu_);
    serving_ = false;
    stopped_ = status;
    sessions = SessionsLocked();
    on_serving = on_serving_;
  }
  commands_.ForgetUtilities();
  if (on_serving) on_serving(false);
  for (const auto& session : sessions) {
    if (last_event != nullptr) session->Send(*last_event);
    session->End(status);
  }
}

// ---- Sessions --------------------------------------------------------------------

void Worker::CheckDefaultsInLoop(const v1::Hello& hello,
                                 std::function<void(const absl::Status&)> done) {
  if (!hello.has_defaults() || !engine_->validates_in_loop()) {
    done(absl::OkStatus());
    return;
  }
  core_.Submit(CheckDefaultsMessage(hello, std::move(done)));
}

absl::StatusOr<std::shared_ptr<ConnectSession>> Worker::OpenSession(const v1::Hello& hello,
                                                                    uint64_t hello_seq,
                                                                    EventTransport* transport,
                                                                    const std::string& peer) {
  if (absl::Status s = CheckHello(hello, options_.stage_id, *engine_); !s.ok()) return s;
  // Cache events from an engine without a cache: none to give.
  const bool wants_cache_events = hello.want_cache_events() && cache_layout_.block_tokens > 0;
  absl::MutexLock lock(&mu_);
  return std::make_shared<ConnectSession>(next_session_++, peer, transport, hello_seq,
                                          wants_cache_events);
}

void Worker::StartSession(const std::shared_ptr<ConnectSession>& session) {
  // The session is registered before anything is sent on it, and holds what it
  // is sent until Ready is written (ConnectSession::Open): a drain, a stall, a load
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
  v1::WorkerEvent event = ReadyEvent(ReadyFacts{options_.stage_id, options_.instance_id,
                                                options_.engine_name, options_.max_message_bytes},
                                     *engine_, session->id(), static_cast<int>(live_requests()));
  v1::Ready* ready = event.mutable_ready();
  if (cache.has_value()) *ready->mutable_load()->mutable_cache() = *std::move(cache);
  LogInfo(SessionContext(log_context_, *session),
          absl::StrCat("session opened",
                       session->peer().empty() ? "" : absl::StrCat(" by '", session->peer(), "'")));
  session->Open(std::move(event));
}

void Worker::CloseSession(ConnectSession& session) {
  std::vector<CoreMessage> released;
  const bool was_closed = session.closed();
  std::vector<std::string> ids = session.Close(&released);
  spans_.SessionClosed(session.number());
  if (!was_closed) {
    LogInfo(SessionContext(log_context_, session),
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
  std::shared_ptr<ConnectSession> session;
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
    for (const std::string& id : aborted) {
      spans_.Ended(session->number(), id, v1::FINISH_REASON_ABORT, "");
    }
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

std::shared_ptr<ConnectSession> Worker::FindSession(uint64_t number) const {
  absl::MutexLock lock(&mu_);
  return FindSessionLocked(number);
}

std::shared_ptr<ConnectSession> Worker::FindSessionLocked(uint64_t number) const {
  auto it = sessions_.find(number);
  return it == sessions_.end() ? nullptr : it->second;
}

std::vector<std::shared_ptr<ConnectSession>> Worker::SessionsLocked() const {
  std::vector<std::shared_ptr<ConnectSession>> sessions;
  sessions.reserve(sessions_.size());
  for (const auto& [number, session] : sessions_) sessions.push_back(session);
  return sessions;
}

}  // namespace omnistage
