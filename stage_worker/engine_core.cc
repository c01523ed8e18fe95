#include "stage_worker/engine_core.h"

#include <utility>

namespace omnistage {

CoreMessage CoreMessage::Add(EngineRequest request, std::function<void()> taken,
                             std::function<void(const absl::Status&)> rejected) {
  CoreMessage m;
  m.kind = Kind::kAdd;
  m.request = std::move(request);
  m.add_taken = std::move(taken);
  m.add_rejected = std::move(rejected);
  return m;
}

CoreMessage CoreMessage::Check(EngineRequest request,
                               std::function<void(const absl::Status&)> done) {
  CoreMessage m;
  m.kind = Kind::kCheck;
  m.request = std::move(request);
  m.add_rejected = std::move(done);
  return m;
}

CoreMessage CoreMessage::AppendInput(std::string id, std::vector<v1::Payload> chunks, bool last) {
  CoreMessage m;
  m.kind = Kind::kAppendInput;
  m.id = std::move(id);
  m.chunks = std::move(chunks);
  m.last = last;
  return m;
}

CoreMessage CoreMessage::Deadlines(std::vector<std::pair<std::string, absl::Time>> deadlines) {
  CoreMessage m;
  m.kind = Kind::kDeadlines;
  m.deadlines = std::move(deadlines);
  return m;
}

CoreMessage CoreMessage::Abort(std::vector<std::string> ids,
                               std::function<void(bool applied)> done) {
  CoreMessage m;
  m.kind = Kind::kAbort;
  m.ids = std::move(ids);
  m.abort_done = std::move(done);
  return m;
}

CoreMessage CoreMessage::Utility(uint64_t call_id, std::string name,
                                 google::protobuf::ListValue args) {
  CoreMessage m;
  m.kind = Kind::kUtility;
  m.call_id = call_id;
  m.name = std::move(name);
  m.args = std::move(args);
  return m;
}

CoreMessage CoreMessage::Wakeup() { return CoreMessage(); }

bool InputQueue::Push(CoreMessage& message) {
  absl::MutexLock lock(&mu_);
  if (closed_) return false;
  messages_.push_back(std::move(message));
  return true;
}

bool InputQueue::PushAll(std::vector<CoreMessage>& messages) {
  absl::MutexLock lock(&mu_);
  if (closed_) return false;
  for (CoreMessage& m : messages) messages_.push_back(std::move(m));
  return true;
}

size_t InputQueue::size() const {
  absl::MutexLock lock(&mu_);
  return messages_.size();
}

CoreMessage InputQueue::PopBlocking() {
  absl::MutexLock lock(&mu_);
  auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !messages_.empty(); };
  mu_.Await(absl::Condition(&ready));
  CoreMessage m = std::move(messages_.front());
  messages_.pop_front();
  return m;
}

void InputQueue::DrainInto(std::deque<CoreMessage>* out) {
  absl::MutexLock lock(&mu_);
  if (out->empty()) {
    out->swap(messages_);
    return;
  }
  for (auto& m : messages_) out->push_back(std::move(m));
  messages_.clear();
}

std::deque<CoreMessage> InputQueue::Close() {
  absl::MutexLock lock(&mu_);
  closed_ = true;
  std::deque<CoreMessage> rest;
  rest.swap(messages_);
  return rest;
}

EngineCore::EngineCore(Engine* engine, CoreSink* sink) : engine_(engine), sink_(sink) {}

namespace {

// A message the closed queue refused: the callbacks that must run, run now.
void AnswerRefused(CoreMessage& m) {
  if (m.abort_done) m.abort_done(false);
  if (m.kind == CoreMessage::Kind::kCheck) m.add_rejected(absl::OkStatus());
}

}  // namespace

bool EngineCore::Submit(CoreMessage message) {
  if (queue_.Push(message)) return true;
  AnswerRefused(message);
  return false;
}

bool EngineCore::SubmitAll(std::vector<CoreMessage> messages) {
  if (queue_.PushAll(messages)) return true;
  for (CoreMessage& m : messages) AnswerRefused(m);
  return false;
}

void EngineCore::RequestShutdown() {
  shutdown_.store(true);
  CoreMessage wakeup = CoreMessage::Wakeup();
  queue_.Push(wakeup);  // A closed queue means the loop has already ended.
}

void EngineCore::Run() {
  const absl::Status result = Loop();
  for (CoreMessage& m : queue_.Close()) Reject(m);
  if (result.ok()) {
    sink_->OnShutdown();
  } else {
    sink_->OnFatal(result);
  }
}

absl::Status EngineCore::Loop() {
  std::deque<CoreMessage> batch;
  while (!shutdown_.load()) {
    if (!engine_->HasWork()) {
      // The only place the loop blocks. The message it returns is a real one.
      const absl::Time blocked = absl::Now();
      CoreMessage first = queue_.PopBlocking();
      sink_->OnIdle(absl::Now() - blocked);
      if (absl::Status s = Apply(first); !s.ok()) return s;
    }
    queue_.DrainInto(&batch);
    while (!batch.empty()) {
      CoreMessage m = std::move(batch.front());
      batch.pop_front();
      if (absl::Status s = Apply(m); !s.ok()) {
        for (CoreMessage& rest : batch) Reject(rest);
        return s;
      }
    }
    if (shutdown_.load()) break;
    if (engine_->HasWork()) {
      const uint64_t step = steps_.load(std::memory_order_relaxed) + 1;
      sink_->OnStepBegin(step);
      const absl::Time began = absl::Now();
      absl::StatusOr<std::vector<v1::RequestOutput>> outputs = engine_->Step();
      const absl::Duration took = absl::Now() - began;
      sink_->OnStepEnd(step);
      if (!outputs.ok()) return outputs.status();
      steps_.store(step, std::memory_order_relaxed);
      sink_->OnStepped(took, outputs->size(), engine_->load());
      sink_->OnStepOutputs(step, *std::move(outputs));
    }
  }
  return absl::OkStatus();
}

absl::Status EngineCore::Apply(CoreMessage& m) {
  switch (m.kind) {
    case CoreMessage::Kind::kAdd: {
      if (absl::Status refused = engine_->ValidateInLoop(m.request); !refused.ok()) {
        if (m.add_rejected) m.add_rejected(refused);
        return absl::OkStatus();  // That request's problem, not the engine's.
      }
      absl::Status status = engine_->Add(std::move(m.request));
      if (status.ok() && m.add_taken) m.add_taken();
      return status;
    }
    case CoreMessage::Kind::kAppendInput:
      return engine_->AppendInput(m.id, std::move(m.chunks), m.last);
    case CoreMessage::Kind::kDeadlines:
      for (const auto& [id, runs_out] : m.deadlines) engine_->SetPlaybackDeadline(id, runs_out);
      return absl::OkStatus();
    case CoreMessage::Kind::kAbort:
      engine_->Abort(m.ids);
      sink_->OnAbortApplied(m.ids.size(), engine_->load());
      if (m.abort_done) m.abort_done(true);
      return absl::OkStatus();
    case CoreMessage::Kind::kUtility:
      sink_->OnUtilityResult(m.call_id, engine_->Utility(m.name, m.args));
      return absl::OkStatus();
    case CoreMessage::Kind::kCheck:
      m.add_rejected(engine_->ValidateInLoop(m.request));
      return absl::OkStatus();
    case CoreMessage::Kind::kWakeup:
      return absl::OkStatus();
  }
  return absl::OkStatus();
}

void EngineCore::Reject(CoreMessage& m) {
  switch (m.kind) {
    case CoreMessage::Kind::kAbort:
      if (m.abort_done) m.abort_done(false);
      break;
    case CoreMessage::Kind::kCheck:
      m.add_rejected(absl::OkStatus());  // The session will hear why the loop ended.
      break;
    case CoreMessage::Kind::kUtility:
      sink_->OnUtilityResult(m.call_id,
                             absl::UnavailableError("the worker's engine loop has stopped"));
      break;
    default:
      break;
  }
}

}  // namespace omnistage
