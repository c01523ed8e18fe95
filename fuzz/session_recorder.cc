#include "fuzz/session_recorder.h"

#include <cstdio>
#include <utility>

#include "fuzz/fuzz_check.h"

namespace omnistage {
namespace fuzz {
namespace {

v1::CommandRejected::Kind KindOf(v1::WorkerCommand::CommandCase command) {
  switch (command) {
    case v1::WorkerCommand::kHello:
      return v1::CommandRejected::KIND_HELLO;
    case v1::WorkerCommand::kAdd:
      return v1::CommandRejected::KIND_ADD;
    case v1::WorkerCommand::kAppendInput:
      return v1::CommandRejected::KIND_APPEND_INPUT;
    case v1::WorkerCommand::kUtility:
      return v1::CommandRejected::KIND_UTILITY;
    default:
      return v1::CommandRejected::KIND_UNSPECIFIED;
  }
}

}  // namespace

void SessionRecorder::Attach(std::shared_ptr<ConnectSession> session) {
  session_ = std::move(session);
}

void SessionRecorder::Sent(const v1::WorkerCommand& command, Expect expect) {
  SentCommand sent{command.command_case(), "", 0, expect};
  if (command.has_add()) sent.request_id = command.add().request_id();
  if (command.has_append_input()) sent.request_id = command.append_input().request_id();
  if (command.has_utility()) sent.call_id = command.utility().call_id();
  absl::MutexLock lock(&mu_);
  if (command.has_add()) {
    ++adds_[sent.request_id];
    added_order_.push_back(sent.request_id);
  }
  sent_.emplace(command.seq(), std::move(sent));
}

void SessionRecorder::BeginWrite(const v1::WorkerEvent* event) {
  {
    absl::MutexLock lock(&mu_);
    if (trace_) {
      std::fprintf(stderr, "fuzz: %s -> %s\n", label_.c_str(), event->ShortDebugString().c_str());
    }
    FUZZ_CHECK(ends_ == 0, label_, ": a write after the stream ended: ", event->ShortDebugString());
    FUZZ_CHECK(!writing_, label_, ": a second write while one is in flight");
    FUZZ_CHECK(ready_ > 0 || event->has_ready(), label_,
               ": the first event is not Ready: ", event->ShortDebugString());
    switch (event->event_case()) {
      case v1::WorkerEvent::kReady:
        FUZZ_CHECK(++ready_ == 1, label_, ": Ready twice");
        FUZZ_CHECK(event->ready().session_id() == session_->id(), label_, ": Ready names ",
                   event->ready().session_id());
        break;
      case v1::WorkerEvent::kStep:
        OnStep(event->step());
        break;
      case v1::WorkerEvent::kRejected:
        OnRejected(event->rejected());
        break;
      case v1::WorkerEvent::kUtilityResult: {
        const uint64_t call = event->utility_result().call_id();
        bool made = false;
        for (const auto& [seq, sent] : sent_) made |= sent.call_id == call && call != 0;
        FUZZ_CHECK(made, label_, ": a result for utility call ", call, ", never made");
        FUZZ_CHECK(++utility_results_[call] == 1, label_, ": utility call ", call,
                   " answered twice");
        if (event->utility_result().has_value()) {
          utility_values_[call] = event->utility_result().value();
        }
        break;
      }
      case v1::WorkerEvent::kFatal:
        fatal_ = true;
        break;
      case v1::WorkerEvent::EVENT_NOT_SET:
        FUZZ_CHECK(false, label_, ": an empty event");
        break;
      default:
        break;
    }
    writing_ = true;
    if (!inline_writes_) return;
  }
  CompleteWrite();
}

void SessionRecorder::OnStep(const v1::StepOutputs& step) {
  // A step event carries outputs, or only the worker's new load (for a session
  // that had no output in a step that changed it).
  FUZZ_CHECK(step.outputs_size() > 0 || step.has_load(), label_,
             ": a step event with neither outputs nor a load");
  FUZZ_CHECK(!step.has_load() || step.load().requests() >= 0, label_, ": a negative load ",
             step.load().requests());
  for (const v1::RequestOutput& output : step.outputs()) {
    const std::string& id = output.request_id();
    // An Add is counted before the worker sees it, so this is an upper bound.
    const int open = adds_[id] - ended_[id];
    FUZZ_CHECK(open > 0, label_, ": output for '", id, "', which ",
               adds_[id] == 0 ? "was never added" : "already ended", ": ",
               output.ShortDebugString());
    if (!output.finished()) continue;
    ++ended_[id];
    FUZZ_CHECK(output.finish_reason() != v1::FINISH_REASON_UNSPECIFIED, label_, ": '", id,
               "' finished without a reason");
  }
}

void SessionRecorder::OnRejected(const v1::CommandRejected& rejected) {
  const uint64_t seq = rejected.seq();
  const int sent = static_cast<int>(sent_.count(seq));
  FUZZ_CHECK(sent > 0, label_, ": a rejection of seq ", seq, ", never sent");
  FUZZ_CHECK(++rejections_[seq] <= sent, label_, ": seq ", seq, " rejected more often than sent");
  bool matches = false;
  auto [begin, end] = sent_.equal_range(seq);
  for (auto it = begin; it != end; ++it) {
    matches |= KindOf(it->second.kind) == rejected.command() &&
               it->second.request_id == rejected.request_id();
  }
  FUZZ_CHECK(matches, label_, ": a rejection that fits no command of seq ", seq, ": ",
             rejected.ShortDebugString());
  FUZZ_CHECK(rejected.error().code() != 0 && !rejected.error().message().empty(), label_,
             ": a rejection without an error");
  if (rejected.command() == v1::CommandRejected::KIND_ADD) {
    // A refused Add never started: it ends nowhere.
    --adds_[rejected.request_id()];
  }
}

void SessionRecorder::FinishStream(const absl::Status& status) {
  absl::MutexLock lock(&mu_);
  FUZZ_CHECK(++ends_ == 1, label_, ": the stream ended twice (", status.ToString(), ")");
  FUZZ_CHECK(!writing_, label_, ": the stream ended with a write in flight");
}

bool SessionRecorder::CompleteWrite() {
  {
    absl::MutexLock lock(&mu_);
    if (!writing_) return false;
    writing_ = false;
  }
  session_->OnWriteDone(true);  // May start the next write, here.
  return true;
}

bool SessionRecorder::stream_ended() const {
  absl::MutexLock lock(&mu_);
  return ends_ > 0;
}

bool SessionRecorder::fatal_seen() const {
  absl::MutexLock lock(&mu_);
  return fatal_;
}

std::optional<google::protobuf::Value> SessionRecorder::AwaitUtility(uint64_t call_id,
                                                                     absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    CompleteWrite();
    absl::MutexLock lock(&mu_);
    // A stream that ended (the worker stopped) will not answer.
    auto answered = [this, call_id]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return utility_results_.count(call_id) > 0 || ends_ > 0;
    };
    if (mu_.AwaitWithTimeout(absl::Condition(&answered), absl::Milliseconds(1))) {
      auto it = utility_values_.find(call_id);
      if (it == utility_values_.end()) return std::nullopt;
      return it->second;
    }
  }
  return std::nullopt;
}

std::vector<std::string> SessionRecorder::added_ids() const {
  absl::MutexLock lock(&mu_);
  return added_order_;
}

void SessionRecorder::Check(bool settled) const {
  absl::MutexLock lock(&mu_);
  for (const auto& [id, adds] : adds_) {
    const int ended = ended_.count(id) > 0 ? ended_.at(id) : 0;
    FUZZ_CHECK(settled ? ended == adds : ended <= adds, label_, ": '", id, "' was taken ", adds,
               " times and ended ", ended, " times");
  }
  if (!settled) return;
  for (const auto& [seq, sent] : sent_) {
    const int rejected = rejections_.count(seq) > 0 ? rejections_.at(seq) : 0;
    FUZZ_CHECK(sent.expect != Expect::kRefused || rejected > 0, label_, ": command seq ", seq,
               " for '", sent.request_id, "' should have been refused");
    FUZZ_CHECK(sent.expect != Expect::kTaken || rejected == 0, label_, ": command seq ", seq,
               " for '", sent.request_id, "' was refused");
    if (sent.kind == v1::WorkerCommand::kUtility && rejected == 0) {
      FUZZ_CHECK(utility_results_.count(sent.call_id) > 0, label_, ": utility call ", sent.call_id,
                 " never answered");
    }
  }
}

}  // namespace fuzz
}  // namespace omnistage
