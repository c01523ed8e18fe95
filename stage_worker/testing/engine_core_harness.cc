#include "stage_worker/testing/engine_core_harness.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"

namespace omnistage {
namespace engine_core_test {

EngineRequest Request(std::string id, uint32_t steps) {
  EngineRequest request;
  request.id = std::move(id);
  request.params.set_max_tokens(steps);
  return request;
}

google::protobuf::ListValue Args(double a, double b) {
  google::protobuf::ListValue args;
  args.add_values()->set_number_value(a);
  args.add_values()->set_number_value(b);
  return args;
}

// ---------------------------------------------------------------------------
// FakeEngine

void FakeEngine::FailStep(uint64_t n) {
  absl::MutexLock lock(&mu_);
  fail_step_ = n;
}

void FakeEngine::FailAdd(std::string id) {
  absl::MutexLock lock(&mu_);
  fail_add_id_ = std::move(id);
}

void FakeEngine::AllowSteps(uint64_t limit) {
  absl::MutexLock lock(&mu_);
  allowed_steps_ = limit;
}

void FakeEngine::Note(std::string line) {
  absl::MutexLock lock(&mu_);
  calls_.push_back(std::move(line));
}

std::vector<std::string> FakeEngine::calls() const {
  absl::MutexLock lock(&mu_);
  return calls_;
}

int FakeEngine::has_work_calls() const {
  absl::MutexLock lock(&mu_);
  return has_work_calls_;
}

uint64_t FakeEngine::steps_started() const {
  absl::MutexLock lock(&mu_);
  return steps_started_;
}

bool FakeEngine::WaitForStepStarted(uint64_t n, absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  auto started = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return steps_started_ >= n; };
  return mu_.AwaitWithTimeout(absl::Condition(&started), timeout);
}

bool FakeEngine::WaitForHasWorkCalls(int n, absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  auto called = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return has_work_calls_ >= n; };
  return mu_.AwaitWithTimeout(absl::Condition(&called), timeout);
}

absl::Status FakeEngine::Validate(const EngineRequest& request) const { return absl::OkStatus(); }

void FakeEngine::RefuseInLoop(std::string id) {
  absl::MutexLock lock(&mu_);
  refuse_id_ = std::move(id);
}

absl::Status FakeEngine::ValidateInLoop(const EngineRequest& request) {
  absl::MutexLock lock(&mu_);
  if (request.id != refuse_id_) return absl::OkStatus();
  calls_.push_back(absl::StrCat("refuse ", request.id));
  return absl::InvalidArgumentError(absl::StrCat("refused ", request.id));
}

absl::Status FakeEngine::Add(EngineRequest request) {
  absl::MutexLock lock(&mu_);
  calls_.push_back(absl::StrCat(
      "add ", request.id,
      request.produced.empty() ? "" : absl::StrCat(" produced=", request.produced.size())));
  if (request.id == fail_add_id_) {
    return absl::InternalError(absl::StrCat("cannot add ", request.id));
  }
  live_.emplace_back(request.id, request.params.max_tokens());
  return absl::OkStatus();
}

absl::Status FakeEngine::AppendInput(const std::string& id, std::vector<v1::Payload> chunks,
                                     bool last) {
  absl::MutexLock lock(&mu_);
  calls_.push_back(absl::StrCat("append ", id, last ? " last" : ""));
  return absl::OkStatus();
}

void FakeEngine::SetPlaybackDeadline(const std::string& id, absl::Time runs_out) {
  absl::MutexLock lock(&mu_);
  calls_.push_back(absl::StrCat("deadline ", id, " +", absl::ToUnixMillis(runs_out)));
}

void FakeEngine::Abort(const std::vector<std::string>& ids) {
  absl::MutexLock lock(&mu_);
  calls_.push_back(absl::StrCat("abort [", absl::StrJoin(ids, ","), "]"));
  live_.erase(std::remove_if(live_.begin(), live_.end(),
                             [&ids](const std::pair<std::string, uint32_t>& r) {
                               return std::find(ids.begin(), ids.end(), r.first) != ids.end();
                             }),
              live_.end());
}

EngineLoad FakeEngine::load() const {
  absl::MutexLock lock(&mu_);
  return {static_cast<int>(live_.size()), 0};
}

bool FakeEngine::HasWork() const {
  absl::MutexLock lock(&mu_);
  ++has_work_calls_;
  return !live_.empty();
}

absl::StatusOr<std::vector<v1::RequestOutput>> FakeEngine::Step() {
  absl::MutexLock lock(&mu_);
  const uint64_t n = ++steps_started_;
  calls_.push_back(absl::StrCat("step ", n));
  auto allowed = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return n <= allowed_steps_; };
  mu_.Await(absl::Condition(&allowed));
  if (n == fail_step_) return absl::InternalError("NCCL timeout");
  std::vector<v1::RequestOutput> outputs;
  for (auto& [id, remaining] : live_) {
    --remaining;
    v1::RequestOutput& out = outputs.emplace_back();
    out.set_request_id(id);
    out.add_payloads()->mutable_tokens()->add_ids(static_cast<int32_t>(remaining));
    out.set_finished(remaining == 0);
  }
  live_.erase(
      std::remove_if(live_.begin(), live_.end(),
                     [](const std::pair<std::string, uint32_t>& r) { return r.second == 0; }),
      live_.end());
  return outputs;
}

absl::StatusOr<google::protobuf::Value> FakeEngine::Utility(
    const std::string& name, const google::protobuf::ListValue& args) {
  std::vector<double> numbers;
  for (const google::protobuf::Value& v : args.values()) {
    numbers.push_back(v.number_value());
  }
  {
    absl::MutexLock lock(&mu_);
    calls_.push_back(absl::StrCat("utility ", name, "(", absl::StrJoin(numbers, ","), ")"));
  }
  if (name != "div" || numbers.size() != 2) {
    return absl::NotFoundError(absl::StrCat("no utility ", name));
  }
  if (numbers[1] == 0) return absl::InvalidArgumentError("division by zero");
  google::protobuf::Value result;
  result.set_number_value(numbers[0] / numbers[1]);
  return result;
}

// ---------------------------------------------------------------------------
// RecordingSink

void RecordingSink::OnStepOutputs(uint64_t step, std::vector<v1::RequestOutput> outputs) {
  std::vector<std::string> rendered;
  for (const v1::RequestOutput& out : outputs) {
    const int remaining = out.payloads_size() == 1 && out.payloads(0).tokens().ids_size() == 1
                              ? out.payloads(0).tokens().ids(0)
                              : -1;
    // The fake marks exactly the last output finished; anything else is mangled.
    const bool consistent = out.finished() == (remaining == 0);
    rendered.push_back(absl::StrCat("(", out.request_id(), ",", remaining,
                                    consistent ? "" : ",bad-finished", ")"));
  }
  Record(absl::StrCat("step ", step, ": ", absl::StrJoin(rendered, " ")));
}

void RecordingSink::OnUtilityResult(uint64_t call_id,
                                    absl::StatusOr<google::protobuf::Value> result) {
  Record(result.ok() ? absl::StrCat("utility ", call_id, " = ", result->number_value())
                     : absl::StrCat("utility ", call_id, " error ", result.status().ToString()));
}

void RecordingSink::OnShutdown() { Record("shutdown"); }

void RecordingSink::OnFatal(const absl::Status& reason) {
  Record(absl::StrCat("fatal ", reason.ToString()));
}

std::vector<std::string> RecordingSink::events() const {
  absl::MutexLock lock(&mu_);
  return events_;
}

bool RecordingSink::WaitFor(const std::string& event, absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  auto seen = [this, &event]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return std::find(events_.begin(), events_.end(), event) != events_.end();
  };
  return mu_.AwaitWithTimeout(absl::Condition(&seen), timeout);
}

bool RecordingSink::AllCalledOn(std::thread::id id) const {
  absl::MutexLock lock(&mu_);
  return std::all_of(threads_.begin(), threads_.end(), [id](std::thread::id t) { return t == id; });
}

void RecordingSink::Record(std::string event) {
  absl::MutexLock lock(&mu_);
  events_.push_back(std::move(event));
  threads_.push_back(std::this_thread::get_id());
}

void RecordingSink::OnIdle(absl::Duration blocked) {
  absl::MutexLock lock(&mu_);
  ++idles_;
}

void RecordingSink::OnStepped(absl::Duration took, size_t outputs, EngineLoad load) {
  absl::MutexLock lock(&mu_);
  metric_events_.push_back(absl::StrCat("stepped outputs=", outputs, " running=", load.running));
}

void RecordingSink::OnAbortApplied(size_t ids, EngineLoad load) {
  absl::MutexLock lock(&mu_);
  metric_events_.push_back(absl::StrCat("aborted ids=", ids, " running=", load.running));
}

std::vector<std::string> RecordingSink::metric_events() const {
  absl::MutexLock lock(&mu_);
  return metric_events_;
}

int RecordingSink::idles() const {
  absl::MutexLock lock(&mu_);
  return idles_;
}

}  // namespace engine_core_test
}  // namespace omnistage
