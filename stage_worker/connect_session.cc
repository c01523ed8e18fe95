#include "stage_worker/connect_session.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/error_proto.h"
#include "common/random_id.h"
#include "stage_worker/cache_delta.h"

namespace omnistage {

namespace {

StreamWriter<v1::WorkerEvent>::Options WriterOptions(uint64_t number,
                                                     std::function<void(int64_t)> on_queued_bytes) {
  StreamWriter<v1::WorkerEvent>::Options options;
  options.on_queued_bytes = std::move(on_queued_bytes);
  options.label = absl::StrCat("session ", number);
  // A client that stopped reading: closing its stream aborts its requests,
  // rather than letting memory grow without bound.
  options.max_queued = ConnectSession::kMaxQueuedEvents;
  // While a write is in flight, the steps that follow queue and go out as one
  // event: their outputs in order, under the last step's number. Other events
  // keep their place between them; the last step's load stands, and cache
  // reports add up: a later snapshot replaces what came before it, a later
  // change of a block replaces its earlier one.
  options.merge = [](v1::WorkerEvent& into, v1::WorkerEvent& next) {
    if (!into.has_step() || !next.has_step()) return false;
    v1::StepOutputs& step = *into.mutable_step();
    // The outputs change hands whole (heap messages: pointers move, nothing is
    // allocated or copied).
    auto& outputs = *next.mutable_step()->mutable_outputs();
    std::vector<v1::RequestOutput*> moved(outputs.size());
    outputs.ExtractSubrange(0, outputs.size(), moved.data());
    for (v1::RequestOutput* output : moved) step.mutable_outputs()->AddAllocated(output);
    step.set_step(std::max(step.step(), next.step().step()));
    if (next.step().has_load()) {
      v1::WorkerLoad& load = *next.mutable_step()->mutable_load();
      if (step.load().has_cache()) {
        CacheDelta cache(step.load().cache());
        if (load.has_cache()) cache.Apply(load.cache());
        *load.mutable_cache() = cache.ToProto();
      }
      *step.mutable_load() = std::move(load);
    }
    return true;
  };
  options.max_write_bytes = ConnectSession::kMaxMergedEventBytes;
  return options;
}

}  // namespace

ConnectSession::ConnectSession(uint64_t number, std::string peer, EventTransport* transport,
                               uint64_t first_seq, bool wants_cache_events)
    : number_(number),
      peer_(std::move(peer)),
      id_(absl::StrCat(number, "-", RandomHex(16))),
      wants_cache_events_(wants_cache_events),
      writer_(transport, WriterOptions(number,
                                       [this](int64_t delta) {
                                         absl::MutexLock lock(&queue_mu_);
                                         queued_bytes_ += delta;
                                         if (delta < 0) ++writes_taken_;
                                       })),
      last_seq_(first_seq) {}

void ConnectSession::Send(v1::WorkerEvent event) {
  if (!open_.load(std::memory_order_acquire)) {
    absl::MutexLock lock(&held_mu_);
    if (!open_.load(std::memory_order_relaxed)) {
      // After a held End() the stream is ending: dropped, as the writer would.
      if (!held_end_.has_value()) held_.push_back(std::move(event));
      return;
    }
  }
  writer_.Write(std::move(event));
}

void ConnectSession::End(const absl::Status& status) {
  if (!open_.load(std::memory_order_acquire)) {
    absl::MutexLock lock(&held_mu_);
    if (!open_.load(std::memory_order_relaxed)) {
      if (!held_end_.has_value()) held_end_ = status;
      return;
    }
  }
  writer_.End(status);
}

void ConnectSession::Open(std::optional<v1::WorkerEvent> first) {
  if (first.has_value()) writer_.Write(*std::move(first));
  // Written outside the lock (the writer may call the transport inline); what
  // arrives meanwhile is held and written in the next round, so that order
  // holds. open_ is set with nothing left held.
  for (;;) {
    std::vector<v1::WorkerEvent> held;
    std::optional<absl::Status> end;
    {
      absl::MutexLock lock(&held_mu_);
      if (held_.empty() && !held_end_.has_value()) {
        open_.store(true, std::memory_order_release);
        return;
      }
      held.swap(held_);
      // A held End() stays set: what is sent after it is dropped.
      end = held_end_;
    }
    for (v1::WorkerEvent& event : held) writer_.Write(std::move(event));
    if (end.has_value()) {
      writer_.End(*end);
      return;
    }
  }
}

absl::Duration ConnectSession::WaitForReader(absl::Time deadline) {
  absl::MutexLock lock(&queue_mu_);
  if (queued_bytes_ <= kBackpressureBytes) return absl::ZeroDuration();
  const absl::Time start = absl::Now();
  while (queued_bytes_ > kBackpressureBytes) {
    const uint64_t taken = writes_taken_;
    auto moved = [this, taken]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(queue_mu_) {
      return queued_bytes_ <= kBackpressureBytes || writes_taken_ != taken;
    };
    if (!queue_mu_.AwaitWithDeadline(absl::Condition(&moved),
                                     std::min(deadline, absl::Now() + kReaderProgressTimeout))) {
      break;
    }
  }
  return absl::Now() - start;
}

bool ConnectSession::AddLive(const std::string& request_id, std::string trace_id) {
  absl::MutexLock lock(&mu_);
  return live_.emplace(request_id, Live{std::move(trace_id)}).second;
}

void ConnectSession::MarkTaken(const std::string& request_id) {
  absl::MutexLock lock(&mu_);
  auto it = live_.find(request_id);
  if (it != live_.end()) it->second.taken = true;
}

std::string ConnectSession::EraseLive(const std::string& request_id) {
  absl::MutexLock lock(&mu_);
  auto it = live_.find(request_id);
  if (it == live_.end()) return "";
  std::string trace_id = std::move(it->second.trace_id);
  live_.erase(it);
  return trace_id;
}

std::vector<std::string> ConnectSession::TakeLive(const std::vector<std::string>& ids) {
  std::vector<std::string> taken;
  absl::MutexLock lock(&mu_);
  for (const std::string& id : ids) {
    auto it = live_.find(id);
    if (it == live_.end() || !it->second.taken) continue;
    live_.erase(it);
    taken.push_back(id);
  }
  return taken;
}

void ConnectSession::MarkDrainAcked() {
  absl::MutexLock lock(&mu_);
  drain_acked_ = true;
}

bool ConnectSession::done_adding() const {
  absl::MutexLock lock(&mu_);
  return drain_acked_ || closed_;
}

std::vector<std::string> ConnectSession::LiveIds() const {
  absl::MutexLock lock(&mu_);
  std::vector<std::string> ids;
  ids.reserve(live_.size());
  for (const auto& [id, trace] : live_) ids.push_back(id);
  return ids;
}

std::vector<std::string> ConnectSession::Close(std::vector<CoreMessage>* released) {
  absl::MutexLock lock(&mu_);
  if (closed_) return {};
  closed_ = true;
  std::vector<std::string> ids;
  ids.reserve(live_.size());
  for (const auto& [id, trace] : live_) ids.push_back(id);
  live_.clear();
  // The close aborts everything; fenced aborts need not wait any more.
  for (auto& [seq, message] : fenced_) released->push_back(std::move(message));
  fenced_.clear();
  return ids;
}

bool ConnectSession::closed() const {
  absl::MutexLock lock(&mu_);
  return closed_;
}

size_t ConnectSession::live_count() const {
  absl::MutexLock lock(&mu_);
  return live_.size();
}

absl::Status ConnectSession::Sequence(uint64_t seq, std::optional<CoreMessage> command,
                                      const Submit& submit) {
  absl::MutexLock lock(&mu_);
  if (seq <= last_seq_) {
    return absl::InvalidArgumentError(
        absl::StrCat("command seq ", seq, " does not increase (last was ", last_seq_, ")"));
  }
  last_seq_ = seq;
  std::vector<CoreMessage> batch;
  if (command.has_value()) batch.push_back(*std::move(command));
  auto end = fenced_.upper_bound(seq);
  for (auto it = fenced_.begin(); it != end; ++it) batch.push_back(std::move(it->second));
  fenced_.erase(fenced_.begin(), end);
  if (!batch.empty()) submit(std::move(batch));
  return absl::OkStatus();
}

void ConnectSession::Fence(uint64_t after_seq, CoreMessage abort, const Submit& submit) {
  absl::MutexLock lock(&mu_);
  if (closed_ || after_seq <= last_seq_) {
    std::vector<CoreMessage> batch;
    batch.push_back(std::move(abort));
    submit(std::move(batch));
    return;
  }
  fenced_.emplace(after_seq, std::move(abort));
}

std::string EngineRequestId(uint64_t session, const std::string& request_id) {
  return absl::StrCat(session, "/", request_id);
}

bool ParseEngineRequestId(const std::string& engine_id, uint64_t* session,
                          std::string* request_id) {
  const size_t slash = engine_id.find('/');
  if (slash == std::string::npos) return false;
  if (!absl::SimpleAtoi(absl::string_view(engine_id).substr(0, slash), session)) return false;
  *request_id = engine_id.substr(slash + 1);
  return true;
}

v1::WorkerEvent FinishedEvent(const std::vector<std::string>& ids, v1::FinishReason reason,
                              const absl::Status& why) {
  v1::WorkerEvent event;
  for (const std::string& id : ids) {
    v1::RequestOutput* output = event.mutable_step()->add_outputs();
    output->set_request_id(id);
    output->set_finished(true);
    output->set_finish_reason(reason);
    *output->mutable_error() = ErrorProto(why);
  }
  return event;
}

LogContext SessionContext(const LogContext& worker, const ConnectSession& session,
                          const std::string& request_id, const std::string& trace_id) {
  LogContext context = worker;
  context.request_id = request_id;
  context.trace_id = trace_id;
  context.session = static_cast<int64_t>(session.number());
  return context;
}

}  // namespace omnistage
