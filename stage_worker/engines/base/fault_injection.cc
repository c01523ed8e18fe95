#include "stage_worker/engines/base/fault_injection.h"

#include <cstdio>
#include <cstdlib>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/field_error.h"
#include "common/production_stamp.h"
#include "stage_worker/engines/base/engine_params.h"

namespace omnistage {
namespace {

constexpr int64_t kMaxFaultStep = 1000000000;

}  // namespace

bool FaultOptions::any() const {
  return fail_at_step > 0 || crash_at_step > 0 || hang_at_step > 0 || fail_utilities ||
         stamp_outputs || test_utilities;
}

const std::vector<std::string>& FaultParameterNames() {
  static const auto* const kNames =
      new std::vector<std::string>{"fail_at_step",   "crash_at_step", "hang_at_step",
                                   "fail_utilities", "stamp_outputs", "test_utilities"};
  return *kNames;
}

absl::StatusOr<FaultOptions> TakeFaultOptions(const std::string& engine,
                                              std::map<std::string, std::string>* params) {
  std::map<std::string, std::string> taken;
  for (const std::string& key : FaultParameterNames()) {
    auto it = params->find(key);
    if (it == params->end()) continue;
    taken.insert(params->extract(it));
  }
  EngineParams reader(engine, std::move(taken));
  FaultOptions o;
  o.fail_at_step = reader.Int("fail_at_step", 0, 0, kMaxFaultStep);
  o.crash_at_step = reader.Int("crash_at_step", 0, 0, kMaxFaultStep);
  o.hang_at_step = reader.Int("hang_at_step", 0, 0, kMaxFaultStep);
  o.fail_utilities = reader.Bool("fail_utilities", false);
  o.stamp_outputs = reader.Bool("stamp_outputs", false);
  o.test_utilities = reader.Bool("test_utilities", false);
  if (absl::Status status = reader.Finish(); !status.ok()) return status;
  return o;
}

FaultInjectingEngine::FaultInjectingEngine(std::string name, FaultOptions options,
                                           std::unique_ptr<Engine> inner)
    : name_(std::move(name)), options_(options), inner_(std::move(inner)) {}

absl::Status FaultInjectingEngine::Validate(const EngineRequest& request) const {
  return inner_->Validate(request);
}

absl::Status FaultInjectingEngine::ValidateInLoop(const EngineRequest& request) {
  return inner_->ValidateInLoop(request);
}

bool FaultInjectingEngine::validates_in_loop() const { return inner_->validates_in_loop(); }

absl::Status FaultInjectingEngine::Add(EngineRequest request) {
  return inner_->Add(std::move(request));
}

absl::Status FaultInjectingEngine::AppendInput(const std::string& id,
                                               std::vector<v1::Payload> chunks, bool last) {
  return inner_->AppendInput(id, std::move(chunks), last);
}

void FaultInjectingEngine::SetPlaybackDeadline(const std::string& id, absl::Time runs_out) {
  inner_->SetPlaybackDeadline(id, runs_out);
}

void FaultInjectingEngine::Abort(const std::vector<std::string>& ids) { inner_->Abort(ids); }

bool FaultInjectingEngine::HasWork() const { return inner_->HasWork(); }

absl::StatusOr<std::vector<v1::RequestOutput>> FaultInjectingEngine::Step() {
  ++steps_;
  if (steps_ == options_.crash_at_step) {
    std::fprintf(stderr, "engine %s: crashing at step %lld (crash_at_step)\n", name_.c_str(),
                 static_cast<long long>(steps_));
    std::abort();
  }
  if (steps_ == options_.hang_at_step) {
    // Models a wedged GPU kernel: the busy loop stops dead while the process
    // stays up. Only multi-process tests, which kill the process, should use it.
    std::fprintf(stderr, "engine %s: hanging at step %lld (hang_at_step)\n", name_.c_str(),
                 static_cast<long long>(steps_));
    for (;;) absl::SleepFor(absl::Hours(1));
  }
  if (steps_ == options_.fail_at_step) {
    return absl::InternalError(
        absl::StrCat("engine ", name_, ": injected failure at step ", steps_, " (fail_at_step)"));
  }
  absl::StatusOr<std::vector<v1::RequestOutput>> outputs = inner_->Step();
  if (options_.stamp_outputs && outputs.ok()) {
    const v1::Payload stamp = StampPayload(MonotonicNowNs());
    for (v1::RequestOutput& output : *outputs) {
      if (output.payloads_size() > 0) *output.add_payloads() = stamp;
    }
  }
  return outputs;
}

absl::StatusOr<google::protobuf::Value> FaultInjectingEngine::Utility(
    const std::string& name, const google::protobuf::ListValue& args) {
  if (options_.fail_utilities) {
    return absl::InternalError(
        absl::StrCat("engine ", name_, ": utility '", name, "' failed (fail_utilities is set)"));
  }
  if (!options_.test_utilities) return inner_->Utility(name, args);
  if (name == "div") return Div(args);
  absl::StatusOr<google::protobuf::Value> result = inner_->Utility(name, args);
  if (result.ok() || result.status().code() != absl::StatusCode::kInvalidArgument ||
      !absl::StrContains(result.status().message(), absl::StrCat("unknown utility '", name, "'"))) {
    return result;
  }
  return WithMessage(result.status(),
                     absl::StrCat(result.status().message(), "; also div (test_utilities)"));
}

absl::StatusOr<google::protobuf::Value> FaultInjectingEngine::Div(
    const google::protobuf::ListValue& args) const {
  if (args.values_size() != 2 || !args.values(0).has_number_value() ||
      !args.values(1).has_number_value()) {
    return absl::InvalidArgumentError(
        absl::StrCat("engine ", name_, ": utility div: expected two numbers [a, b]"));
  }
  if (args.values(1).number_value() == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("engine ", name_, ": utility div: division by zero"));
  }
  google::protobuf::Value result;
  result.set_number_value(args.values(0).number_value() / args.values(1).number_value());
  return result;
}

int FaultInjectingEngine::capacity() const { return inner_->capacity(); }

EngineLoad FaultInjectingEngine::load() const { return inner_->load(); }

ResumeMode FaultInjectingEngine::resume_mode() const { return inner_->resume_mode(); }

StreamedInput FaultInjectingEngine::streamed_input() const { return inner_->streamed_input(); }

PrefixCacheLayout FaultInjectingEngine::prefix_cache() const { return inner_->prefix_cache(); }

PrefixCacheStats FaultInjectingEngine::prefix_cache_stats() const {
  return inner_->prefix_cache_stats();
}

std::vector<CacheChange> FaultInjectingEngine::TakeCacheChanges() {
  return inner_->TakeCacheChanges();
}

std::unique_ptr<Engine> WithFaults(std::string name, const FaultOptions& options,
                                   std::unique_ptr<Engine> engine) {
  if (!options.any()) return engine;
  return std::make_unique<FaultInjectingEngine>(std::move(name), options, std::move(engine));
}

}  // namespace omnistage
