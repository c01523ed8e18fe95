// Fault injection: the test and benchmark hooks any engine gets, kept out of the
// engines themselves. FaultInjectingEngine wraps an engine (C++ or python) and
// forwards every call to it, adding what its engine parameters ask for:
//
//   fail_at_step N     the N-th Step() call returns INTERNAL
//                      ("engine <name>: injected failure at step N (fail_at_step)")
//   crash_at_step N    the N-th Step() call prints "engine <name>: crashing at step N
//                      (crash_at_step)" on stderr and calls std::abort()
//   hang_at_step N     the N-th Step() call prints "engine <name>: hanging at step N
//                      (hang_at_step)" on stderr and never returns
//   fail_utilities     every Utility() call returns INTERNAL
//   stamp_outputs      each output with payloads also carries a production stamp
//                      (common/production_stamp.h) taken when the step returned
//   test_utilities     the utility "div" [a, b] -> a / b is answered here
//
// N counts every Step() call of the wrapped engine, from 1 (the busy loop calls
// Step() only while HasWork(), so that is every step the worker makes); the
// faulty step does not reach the inner engine. The registry (registry.h) takes
// these keys out of every engine's parameters before the engine reads the rest,
// so the engines know nothing of them, and wraps the engine only when one of them
// turns a hook on (`fail_at_step: 0` leaves the engine as it is).
//
//   std::map<std::string, std::string> params = {{"batch_size", "4"}, {"fail_at_step", "3"}};
//   absl::StatusOr<FaultOptions> faults = TakeFaultOptions("sim_llm", &params);
//   // params is {batch_size: 4} now
//   std::unique_ptr<Engine> engine = WithFaults("sim_llm", *faults, *CreateSimLlmEngine(params));
//
// docs/engines.md describes the knobs for users.
//
// Thread-safety: as Engine. Validate() and capacity() only forward to the inner
// engine's (whose contract makes them thread-safe); everything else runs on the
// busy-loop thread.
#ifndef OMNISTAGE_STAGE_WORKER_ENGINES_BASE_FAULT_INJECTION_H_
#define OMNISTAGE_STAGE_WORKER_ENGINES_BASE_FAULT_INJECTION_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "stage_worker/engines/base/engine.h"

namespace omnistage {

// What the decorator does; the defaults do nothing.
struct FaultOptions {
  // The N-th Step() returns INTERNAL (0 = never). Parameter `fail_at_step`.
  int64_t fail_at_step = 0;
  // The N-th Step() calls std::abort() (0 = never). Parameter `crash_at_step`.
  int64_t crash_at_step = 0;
  // The N-th Step() never returns (0 = never). For multi-process tests only: it
  // wedges the busy loop's thread for good. Parameter `hang_at_step`.
  int64_t hang_at_step = 0;
  // Every Utility() call fails. Parameter `fail_utilities`.
  bool fail_utilities = false;
  // Benchmarks only: each output with payloads also carries a raw payload with
  // the CLOCK_MONOTONIC time the step returned it, for one-way latency. For a
  // pipeline's last stage only: a later stage would get it as input. Parameter
  // `stamp_outputs`.
  bool stamp_outputs = false;
  // The utility "div" for tests of utility calls: [a, b] -> a / b,
  // INVALID_ARGUMENT for other arguments or b = 0. Parameter `test_utilities`.
  bool test_utilities = false;

  // True when any hook is on.
  bool any() const;
};

// The parameter keys TakeFaultOptions() reads, in the order it reads them.
const std::vector<std::string>& FaultParameterNames();

// Moves the keys of FaultParameterNames() out of `params` and reads them.
// INVALID_ARGUMENT for a bad value, naming `engine` and the key, with the key as
// its field path (common/field_error.h), as EngineParams does.
absl::StatusOr<FaultOptions> TakeFaultOptions(const std::string& engine,
                                              std::map<std::string, std::string>* params);

class FaultInjectingEngine : public Engine {
 public:
  // `name` names the engine in messages (the registry's name: "sim_llm", "python").
  FaultInjectingEngine(std::string name, FaultOptions options, std::unique_ptr<Engine> inner);

  absl::Status Validate(const EngineRequest& request) const override;
  absl::Status ValidateInLoop(const EngineRequest& request) override;
  bool validates_in_loop() const override;
  absl::Status Add(EngineRequest request) override;
  absl::Status AppendInput(const std::string& id, std::vector<v1::Payload> chunks,
                           bool last) override;
  void SetPlaybackDeadline(const std::string& id, absl::Time runs_out) override;
  void Abort(const std::vector<std::string>& ids) override;
  bool HasWork() const override;
  absl::StatusOr<std::vector<v1::RequestOutput>> Step() override;
  // fail_utilities, then div (test_utilities), then the inner engine. With
  // test_utilities, an inner INVALID_ARGUMENT that says "unknown utility '<name>'"
  // gets "; also div (test_utilities)" appended, so the message lists every name
  // the call could have used.
  absl::StatusOr<google::protobuf::Value> Utility(const std::string& name,
                                                  const google::protobuf::ListValue& args) override;
  int capacity() const override;
  EngineLoad load() const override;
  // The inner engine's: no hook changes what a request's content is (the
  // production stamps of stamp_outputs are raw payloads, which failover counts
  // but does not compare).
  ResumeMode resume_mode() const override;
  StreamedInput streamed_input() const override;
  // The inner engine's prefix cache, its figures and its changes: no hook
  // touches the cache.
  PrefixCacheLayout prefix_cache() const override;
  PrefixCacheStats prefix_cache_stats() const override;
  std::vector<CacheChange> TakeCacheChanges() override;

 private:
  absl::StatusOr<google::protobuf::Value> Div(const google::protobuf::ListValue& args) const;

  const std::string name_;
  const FaultOptions options_;
  const std::unique_ptr<Engine> inner_;
  int64_t steps_ = 0;  // Step() calls so far
};

// `engine` wrapped in a FaultInjectingEngine when `options` has a hook on, else
// `engine` itself.
std::unique_ptr<Engine> WithFaults(std::string name, const FaultOptions& options,
                                   std::unique_ptr<Engine> engine);

}  // namespace omnistage

#endif  // OMNISTAGE_STAGE_WORKER_ENGINES_BASE_FAULT_INJECTION_H_
