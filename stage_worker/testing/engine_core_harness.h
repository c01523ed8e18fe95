// Shared set-up for the EngineCore tests (engine_core_examples_test.cc and
// engine_core_test.cc).
//
// FakeEngine is the worked examples' toy engine: a request added with max_tokens = k needs k
// more steps; every Step() moves each live request one step on and reports its
// remaining count (as the one token id of its output), removing those that reach 0
// (finished = true). Utility "div" divides its two arguments. The engine records
// every call in order, counts HasWork() calls, and can fail a given step or add, or
// hold steps back until the test lets them run (so the test knows where the loop is
// without sleeping). RecordingSink renders each event as one line, e.g.
// "step 1: (a,1) (b,0)", "utility 7 = 2", "utility 8 error INVALID_ARGUMENT: ...",
// "shutdown", "fatal INTERNAL: NCCL timeout". EngineCoreTest runs the loop on its
// own thread and always stops and joins it.
#ifndef OMNISTAGE_STAGE_WORKER_TESTING_ENGINE_CORE_HARNESS_H_
#define OMNISTAGE_STAGE_WORKER_TESTING_ENGINE_CORE_HARNESS_H_

#include <cstdint>
#include <limits>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "stage_worker/engine_core.h"

namespace omnistage {
namespace engine_core_test {

// How long a test waits for something that should happen at once; generous so
// that slow (sanitizer) builds do not flake.
inline constexpr absl::Duration kDeadline = absl::Seconds(10);
inline constexpr uint64_t kAllSteps = std::numeric_limits<uint64_t>::max();

// A request that needs `steps` more steps.
EngineRequest Request(std::string id, uint32_t steps);

google::protobuf::ListValue Args(double a, double b);

class FakeEngine : public Engine {
 public:
  // Step number `n` (counted from 1) fails with INTERNAL "NCCL timeout".
  void FailStep(uint64_t n);
  // Add() of request `id` fails with INTERNAL.
  void FailAdd(std::string id);
  // ValidateInLoop() refuses request `id` (INVALID_ARGUMENT "refused <id>").
  void RefuseInLoop(std::string id);
  // Step number n > `limit` waits inside Step() (after it is logged) until the limit
  // is raised. Starts unlimited.
  void AllowSteps(uint64_t limit);
  // Appends `line` to the call log; for callbacks that run on the loop thread.
  void Note(std::string line);

  std::vector<std::string> calls() const;
  int has_work_calls() const;
  uint64_t steps_started() const;
  // False if Step() number `n` has not started within `timeout`.
  bool WaitForStepStarted(uint64_t n, absl::Duration timeout) const;
  // False if HasWork() has not been called `n` times within `timeout`.
  bool WaitForHasWorkCalls(int n, absl::Duration timeout) const;

  absl::Status Validate(const EngineRequest& request) const override;
  absl::Status ValidateInLoop(const EngineRequest& request) override;
  absl::Status Add(EngineRequest request) override;
  absl::Status AppendInput(const std::string& id, std::vector<v1::Payload> chunks,
                           bool last) override;
  // Logged as "deadline <id> +<ms from the Unix epoch>".
  void SetPlaybackDeadline(const std::string& id, absl::Time runs_out) override;
  void Abort(const std::vector<std::string>& ids) override;
  bool HasWork() const override;
  absl::StatusOr<std::vector<v1::RequestOutput>> Step() override;
  absl::StatusOr<google::protobuf::Value> Utility(const std::string& name,
                                                  const google::protobuf::ListValue& args) override;
  int capacity() const override { return 64; }
  EngineLoad load() const override;

 private:
  mutable absl::Mutex mu_;
  std::vector<std::string> calls_ ABSL_GUARDED_BY(mu_);
  mutable int has_work_calls_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t steps_started_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t allowed_steps_ ABSL_GUARDED_BY(mu_) = kAllSteps;
  uint64_t fail_step_ ABSL_GUARDED_BY(mu_) = 0;
  std::string fail_add_id_ ABSL_GUARDED_BY(mu_);
  std::string refuse_id_ ABSL_GUARDED_BY(mu_);
  // (id, steps still to run), in the order the requests were added.
  std::vector<std::pair<std::string, uint32_t>> live_ ABSL_GUARDED_BY(mu_);
};

class RecordingSink : public CoreSink {
 public:
  void OnStepOutputs(uint64_t step, std::vector<v1::RequestOutput> outputs) override;
  void OnUtilityResult(uint64_t call_id, absl::StatusOr<google::protobuf::Value> result) override;
  void OnShutdown() override;
  void OnFatal(const absl::Status& reason) override;
  // The metrics hooks, kept apart from events().
  void OnIdle(absl::Duration blocked) override;
  void OnStepped(absl::Duration took, size_t outputs, EngineLoad load) override;
  void OnAbortApplied(size_t ids, EngineLoad load) override;

  std::vector<std::string> events() const;
  // "stepped outputs=N running=R" and "aborted ids=N running=R", in order.
  std::vector<std::string> metric_events() const;
  int idles() const;
  // False if `event` has not been recorded within `timeout`.
  bool WaitFor(const std::string& event, absl::Duration timeout) const;
  // True if every event so far was delivered on thread `id`.
  bool AllCalledOn(std::thread::id id) const;

 private:
  void Record(std::string event);

  mutable absl::Mutex mu_;
  std::vector<std::string> events_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread::id> threads_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> metric_events_ ABSL_GUARDED_BY(mu_);
  int idles_ ABSL_GUARDED_BY(mu_) = 0;
};

class EngineCoreTest : public ::testing::Test {
 protected:
  // A test that returned early (it failed) may leave the loop running or blocked.
  void TearDown() override { ForceStopAndJoin(); }

  void StartLoop() {
    loop_ = std::thread([this] {
      loop_id_ = std::this_thread::get_id();  // Read by the test only after join().
      core_.Run();
      run_returned_.Notify();
    });
  }

  bool WaitForRunReturned(absl::Duration timeout) {
    return run_returned_.WaitForNotificationWithTimeout(timeout);
  }

  // Expects Run() to return by itself, joins the loop thread and checks that every
  // sink call came from it.
  void JoinLoop() {
    EXPECT_TRUE(WaitForRunReturned(kDeadline)) << "Run() did not return";
    ForceStopAndJoin();
    EXPECT_TRUE(sink_.AllCalledOn(loop_id_)) << "a sink call came from another thread";
  }

  // Unblocks the loop by every means (harmless once it has ended) and joins it.
  void ForceStopAndJoin() {
    if (!loop_.joinable()) return;
    if (!run_returned_.HasBeenNotified()) {
      engine_.AllowSteps(kAllSteps);
      core_.RequestShutdown();
      core_.Submit(CoreMessage::Wakeup());
    }
    loop_.join();
  }

  void SubmitExample1Prequeue() {
    ASSERT_TRUE(core_.Submit(CoreMessage::Add(Request("a", 2))));
    ASSERT_TRUE(core_.Submit(CoreMessage::Add(Request("b", 1))));
    ASSERT_TRUE(core_.Submit(CoreMessage::Utility(7, "div", Args(1, 0))));
    ASSERT_TRUE(core_.Submit(CoreMessage::Abort({"b"})));
    ASSERT_TRUE(core_.Submit(CoreMessage::Utility(8, "div", Args(6, 3))));
  }

  FakeEngine engine_;
  RecordingSink sink_;
  EngineCore core_{&engine_, &sink_};
  std::thread loop_;
  std::thread::id loop_id_;
  absl::Notification run_returned_;
};

}  // namespace engine_core_test
}  // namespace omnistage

#endif  // OMNISTAGE_STAGE_WORKER_TESTING_ENGINE_CORE_HARNESS_H_
