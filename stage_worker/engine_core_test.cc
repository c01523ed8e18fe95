// Tests for EngineCore, the stage worker's busy loop (ARCHITECTURE.md §2, seed P10).
//
// FakeEngine is the seed's toy engine: a request added with max_tokens = k needs k
// more steps; every Step() moves each live request one step on and reports its
// remaining count (as the one token id of its output), removing those that reach 0
// (finished = true). Utility "div" divides its two arguments. The engine records
// every call in order, counts HasWork() calls, and can fail a given step or add, or
// hold steps back until the test lets them run (so the test knows where the loop is
// without sleeping). RecordingSink renders each event as one line, e.g.
// "step 1: (a,1) (b,0)", "utility 7 = 2", "utility 8 error INVALID_ARGUMENT: ...",
// "shutdown", "fatal INTERNAL: NCCL timeout".
//
// Sleeps appear only where the seed's scenario is itself timed (examples 1 and 3,
// and the idle-polling check).
#include "stage_worker/engine_core.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <limits>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace omnistage {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::StartsWith;

// How long a test waits for something that should happen at once; generous so
// that slow (sanitizer) builds do not flake.
constexpr absl::Duration kDeadline = absl::Seconds(10);
constexpr uint64_t kAllSteps = std::numeric_limits<uint64_t>::max();

// A request that needs `steps` more steps.
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

class FakeEngine : public Engine {
 public:
  // Step number `n` (counted from 1) fails with INTERNAL "NCCL timeout".
  void FailStep(uint64_t n) {
    absl::MutexLock lock(&mu_);
    fail_step_ = n;
  }
  // Add() of request `id` fails with INTERNAL.
  void FailAdd(std::string id) {
    absl::MutexLock lock(&mu_);
    fail_add_id_ = std::move(id);
  }
  // Step number n > `limit` waits inside Step() (after it is logged) until the limit
  // is raised. Starts unlimited.
  void AllowSteps(uint64_t limit) {
    absl::MutexLock lock(&mu_);
    allowed_steps_ = limit;
  }
  // Appends `line` to the call log; for callbacks that run on the loop thread.
  void Note(std::string line) {
    absl::MutexLock lock(&mu_);
    calls_.push_back(std::move(line));
  }

  std::vector<std::string> calls() const {
    absl::MutexLock lock(&mu_);
    return calls_;
  }
  int has_work_calls() const {
    absl::MutexLock lock(&mu_);
    return has_work_calls_;
  }
  uint64_t steps_started() const {
    absl::MutexLock lock(&mu_);
    return steps_started_;
  }
  // False if Step() number `n` has not started within `timeout`.
  bool WaitForStepStarted(uint64_t n, absl::Duration timeout) const {
    absl::MutexLock lock(&mu_);
    auto started = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return steps_started_ >= n; };
    return mu_.AwaitWithTimeout(absl::Condition(&started), timeout);
  }
  // False if HasWork() has not been called `n` times within `timeout`.
  bool WaitForHasWorkCalls(int n, absl::Duration timeout) const {
    absl::MutexLock lock(&mu_);
    auto called = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return has_work_calls_ >= n; };
    return mu_.AwaitWithTimeout(absl::Condition(&called), timeout);
  }

  absl::Status Validate(const EngineRequest& request) const override { return absl::OkStatus(); }

  absl::Status Add(EngineRequest request) override {
    absl::MutexLock lock(&mu_);
    calls_.push_back(absl::StrCat("add ", request.id));
    if (request.id == fail_add_id_) {
      return absl::InternalError(absl::StrCat("cannot add ", request.id));
    }
    live_.emplace_back(request.id, request.params.max_tokens());
    return absl::OkStatus();
  }

  absl::Status AppendInput(const std::string& id, std::vector<v1::Payload> chunks,
                           bool last) override {
    absl::MutexLock lock(&mu_);
    calls_.push_back(absl::StrCat("append ", id, last ? " last" : ""));
    return absl::OkStatus();
  }

  void Abort(const std::vector<std::string>& ids) override {
    absl::MutexLock lock(&mu_);
    calls_.push_back(absl::StrCat("abort [", absl::StrJoin(ids, ","), "]"));
    live_.erase(std::remove_if(live_.begin(), live_.end(),
                               [&ids](const std::pair<std::string, uint32_t>& r) {
                                 return std::find(ids.begin(), ids.end(), r.first) != ids.end();
                               }),
                live_.end());
  }

  bool HasWork() const override {
    absl::MutexLock lock(&mu_);
    ++has_work_calls_;
    return !live_.empty();
  }

  absl::StatusOr<std::vector<v1::RequestOutput>> Step() override {
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

  absl::StatusOr<google::protobuf::Value> Utility(
      const std::string& name, const google::protobuf::ListValue& args) override {
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

  int capacity() const override { return 64; }

 private:
  mutable absl::Mutex mu_;
  std::vector<std::string> calls_ ABSL_GUARDED_BY(mu_);
  mutable int has_work_calls_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t steps_started_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t allowed_steps_ ABSL_GUARDED_BY(mu_) = kAllSteps;
  uint64_t fail_step_ ABSL_GUARDED_BY(mu_) = 0;
  std::string fail_add_id_ ABSL_GUARDED_BY(mu_);
  // (id, steps still to run), in the order the requests were added.
  std::vector<std::pair<std::string, uint32_t>> live_ ABSL_GUARDED_BY(mu_);
};

class RecordingSink : public CoreSink {
 public:
  void OnStepOutputs(uint64_t step, std::vector<v1::RequestOutput> outputs) override {
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

  void OnUtilityResult(uint64_t call_id, absl::StatusOr<google::protobuf::Value> result) override {
    Record(result.ok() ? absl::StrCat("utility ", call_id, " = ", result->number_value())
                       : absl::StrCat("utility ", call_id, " error ", result.status().ToString()));
  }

  void OnShutdown() override { Record("shutdown"); }

  void OnFatal(const absl::Status& reason) override {
    Record(absl::StrCat("fatal ", reason.ToString()));
  }

  std::vector<std::string> events() const {
    absl::MutexLock lock(&mu_);
    return events_;
  }

  // False if `event` has not been recorded within `timeout`.
  bool WaitFor(const std::string& event, absl::Duration timeout) const {
    absl::MutexLock lock(&mu_);
    auto seen = [this, &event]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return std::find(events_.begin(), events_.end(), event) != events_.end();
    };
    return mu_.AwaitWithTimeout(absl::Condition(&seen), timeout);
  }

  // True if every event so far was delivered on thread `id`.
  bool AllCalledOn(std::thread::id id) const {
    absl::MutexLock lock(&mu_);
    return std::all_of(threads_.begin(), threads_.end(),
                       [id](std::thread::id t) { return t == id; });
  }

 private:
  void Record(std::string event) {
    absl::MutexLock lock(&mu_);
    events_.push_back(std::move(event));
    threads_.push_back(std::this_thread::get_id());
  }

  mutable absl::Mutex mu_;
  std::vector<std::string> events_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread::id> threads_ ABSL_GUARDED_BY(mu_);
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

// ---------------------------------------------------------------------------
// The seed's worked examples.

// Example 1: pre-queued ADD a(2), ADD b(1), UTILITY 7 div(1,0), ABORT [b],
// UTILITY 8 div(6,3); ~200 ms later ADD c(1); ~200 ms later request_shutdown.
TEST_F(EngineCoreTest, Example1PrequeuedMessagesLateAddThenShutdown) {
  SubmitExample1Prequeue();
  StartLoop();
  ASSERT_TRUE(sink_.WaitFor("step 2: (a,0)", kDeadline));
  absl::SleepFor(absl::Milliseconds(200));  // The seed's timing: the loop sits idle.
  ASSERT_TRUE(core_.Submit(CoreMessage::Add(Request("c", 1))));
  ASSERT_TRUE(sink_.WaitFor("step 3: (c,0)", kDeadline));
  absl::SleepFor(absl::Milliseconds(200));
  core_.RequestShutdown();
  JoinLoop();

  EXPECT_THAT(sink_.events(),
              ElementsAre("utility 7 error INVALID_ARGUMENT: division by zero", "utility 8 = 2",
                          "step 1: (a,1)", "step 2: (a,0)", "step 3: (c,0)", "shutdown"));
  // The seed lists add a, add b, abort (b,), step 1, ...; the fake also logs the
  // utilities, which must sit in their FIFO places too.
  EXPECT_THAT(engine_.calls(),
              ElementsAre("add a", "add b", "utility div(1,0)", "abort [b]", "utility div(6,3)",
                          "step 1", "step 2", "add c", "step 3"));
  // The seed's reference loop makes 7 calls; any non-polling loop is single-digit.
  EXPECT_LT(engine_.has_work_calls(), 10);
  EXPECT_EQ(core_.steps(), 3u);
}

// Example 2: the same pre-queue, and step 2 fails: fatal, no shutdown, and an ADD
// that comes after it is never applied.
TEST_F(EngineCoreTest, Example2StepErrorIsFatal) {
  engine_.FailStep(2);
  SubmitExample1Prequeue();
  StartLoop();
  ASSERT_TRUE(sink_.WaitFor("fatal INTERNAL: NCCL timeout", kDeadline));
  EXPECT_FALSE(core_.Submit(CoreMessage::Add(Request("c", 1))));
  JoinLoop();
  EXPECT_FALSE(core_.Submit(CoreMessage::Add(Request("c", 1))));
  core_.RequestShutdown();  // After the end: no effect, no second final event.

  EXPECT_THAT(sink_.events(),
              ElementsAre("utility 7 error INVALID_ARGUMENT: division by zero", "utility 8 = 2",
                          "step 1: (a,1)", "fatal INTERNAL: NCCL timeout"));
  EXPECT_THAT(engine_.calls(), ElementsAre("add a", "add b", "utility div(1,0)", "abort [b]",
                                           "utility div(6,3)", "step 1", "step 2"));
  EXPECT_EQ(core_.steps(), 1u);
}

// Example 3: idle, then a shutdown from another thread.
TEST_F(EngineCoreTest, Example3IdleThenShutdownFromAnotherThread) {
  StartLoop();
  absl::SleepFor(absl::Milliseconds(500));  // The seed's scenario: idle a while.
  EXPECT_EQ(engine_.steps_started(), 0u);
  EXPECT_GE(engine_.has_work_calls(), 1);
  EXPECT_LE(engine_.has_work_calls(), 2);

  std::thread stopper([this] { core_.RequestShutdown(); });
  stopper.join();
  EXPECT_TRUE(WaitForRunReturned(absl::Milliseconds(500)));
  JoinLoop();
  EXPECT_THAT(sink_.events(), ElementsAre("shutdown"));
  EXPECT_THAT(engine_.calls(), IsEmpty());
}

// ---------------------------------------------------------------------------
// One test per pitfall in the seed's table.

// Pitfall: get(timeout=...) polling. Once the work is done the loop blocks; it
// does not keep asking the engine.
TEST_F(EngineCoreTest, IdleLoopDoesNotPoll) {
  ASSERT_TRUE(core_.Submit(CoreMessage::Add(Request("a", 2))));
  StartLoop();
  ASSERT_TRUE(sink_.WaitFor("step 2: (a,0)", kDeadline));
  const int before = engine_.has_work_calls();
  absl::SleepFor(absl::Milliseconds(300));
  EXPECT_LE(engine_.has_work_calls() - before, 2) << "the idle loop polls HasWork()";
  EXPECT_EQ(engine_.steps_started(), 2u);
  core_.RequestShutdown();
  JoinLoop();
}

// Pitfall: the flag without a WAKEUP. A loop blocked on the empty queue wakes at
// once.
TEST_F(EngineCoreTest, ShutdownWakesABlockedLoop) {
  StartLoop();
  ASSERT_TRUE(engine_.WaitForHasWorkCalls(1, kDeadline));  // On its way to blocking.
  core_.RequestShutdown();
  EXPECT_TRUE(WaitForRunReturned(absl::Milliseconds(500)))
      << "the blocked loop did not see the shutdown request";
  JoinLoop();
  EXPECT_THAT(sink_.events(), ElementsAre("shutdown"));
}

// Pitfall: dropping the message the blocking get returned. The single ADD that
// wakes an idle loop is applied and runs to completion.
TEST_F(EngineCoreTest, MessageThatWakesTheLoopIsApplied) {
  StartLoop();
  ASSERT_TRUE(engine_.WaitForHasWorkCalls(1, kDeadline));
  ASSERT_TRUE(core_.Submit(CoreMessage::Add(Request("a", 2))));
  EXPECT_TRUE(sink_.WaitFor("step 2: (a,0)", kDeadline)) << "the first ADD was lost";
  core_.RequestShutdown();
  JoinLoop();
  EXPECT_THAT(sink_.events(), ElementsAre("step 1: (a,1)", "step 2: (a,0)", "shutdown"));
  EXPECT_THAT(engine_.calls(), ElementsAre("add a", "step 1", "step 2"));
}

// Pitfall: one message per step. ADD r1, ABORT r1, ADD r2 queued together all
// reach the engine before its first step, so r1 never produces output.
TEST_F(EngineCoreTest, AppliesEveryQueuedMessageBeforeStepping) {
  ASSERT_TRUE(core_.Submit(CoreMessage::Add(Request("r1", 3))));
  ASSERT_TRUE(core_.Submit(CoreMessage::Abort({"r1"})));
  ASSERT_TRUE(core_.Submit(CoreMessage::Add(Request("r2", 1))));
  StartLoop();
  ASSERT_TRUE(sink_.WaitFor("step 1: (r2,0)", kDeadline));
  core_.RequestShutdown();
  JoinLoop();
  EXPECT_THAT(engine_.calls(), ElementsAre("add r1", "abort [r1]", "add r2", "step 1"));
  EXPECT_THAT(sink_.events(), ElementsAre("step 1: (r2,0)", "shutdown"));
}

// Pitfall: an uncaught step error. The loop reports fatal and Run() returns.
TEST_F(EngineCoreTest, StepErrorEmitsFatalAndEndsTheLoop) {
  engine_.FailStep(1);
  ASSERT_TRUE(core_.Submit(CoreMessage::Add(Request("a", 2))));
  StartLoop();
  JoinLoop();
  EXPECT_THAT(sink_.events(), ElementsAre("fatal INTERNAL: NCCL timeout"));
  EXPECT_THAT(engine_.calls(), ElementsAre("add a", "step 1"));
  EXPECT_FALSE(core_.Submit(CoreMessage::Add(Request("b", 1))));
}

// Pitfall: a step after shutdown. A shutdown requested while the loop applies its
// messages (here from an abort's done callback, i.e. after the loop last checked
// the flag) stops it before it steps the work it has.
TEST_F(EngineCoreTest, NoStepOnceShutdownIsRequestedWhileApplyingMessages) {
  ASSERT_TRUE(core_.Submit(CoreMessage::Add(Request("a", 3))));
  ASSERT_TRUE(
      core_.Submit(CoreMessage::Abort({"nobody"}, [this](bool) { core_.RequestShutdown(); })));
  StartLoop();
  JoinLoop();
  EXPECT_EQ(engine_.steps_started(), 0u);
  EXPECT_THAT(engine_.calls(), ElementsAre("add a", "abort [nobody]"));
  EXPECT_THAT(sink_.events(), ElementsAre("shutdown"));
}

// Same pitfall: work queued but shutdown already requested when the loop starts.
TEST_F(EngineCoreTest, NoStepWhenShutdownWasRequestedBeforeRun) {
  ASSERT_TRUE(core_.Submit(CoreMessage::Add(Request("a", 3))));
  core_.RequestShutdown();
  StartLoop();
  JoinLoop();
  EXPECT_EQ(engine_.steps_started(), 0u);
  EXPECT_THAT(sink_.events(), ElementsAre("shutdown"));
}

// Same pitfall: a shutdown that arrives during a step lets that step finish and
// emit, and no further step starts although the request still has work.
TEST_F(EngineCoreTest, ShutdownDuringAStepMakesItTheLastStep) {
  engine_.AllowSteps(1);
  ASSERT_TRUE(core_.Submit(CoreMessage::Add(Request("a", 100))));
  StartLoop();
  ASSERT_TRUE(engine_.WaitForStepStarted(2, kDeadline));  // Held inside step 2.
  core_.RequestShutdown();
  engine_.AllowSteps(kAllSteps);
  JoinLoop();
  EXPECT_EQ(engine_.steps_started(), 2u);
  EXPECT_THAT(sink_.events(), ElementsAre("step 1: (a,99)", "step 2: (a,98)", "shutdown"));
}

// Pitfall: sorting messages by kind (all ADDs, then all ABORTs, ...). Every kind
// goes through one FIFO: an ABORT before its ADD is a no-op, one after it stops it.
TEST_F(EngineCoreTest, AppliesMessagesInFifoOrderAcrossKinds) {
  ASSERT_TRUE(core_.Submit(CoreMessage::Abort({"r0"})));
  ASSERT_TRUE(core_.Submit(CoreMessage::Add(Request("r0", 1))));
  ASSERT_TRUE(core_.Submit(CoreMessage::Add(Request("r1", 2))));
  ASSERT_TRUE(core_.Submit(CoreMessage::Abort({"r1"})));
  ASSERT_TRUE(core_.Submit(CoreMessage::Utility(1, "div", Args(4, 2))));
  ASSERT_TRUE(core_.Submit(CoreMessage::Add(Request("r2", 1))));
  ASSERT_TRUE(core_.Submit(CoreMessage::AppendInput("r2", {}, /*last=*/true)));
  ASSERT_TRUE(core_.Submit(CoreMessage::Wakeup()));
  StartLoop();
  ASSERT_TRUE(sink_.WaitFor("step 1: (r0,0) (r2,0)", kDeadline));
  core_.RequestShutdown();
  JoinLoop();
  EXPECT_THAT(engine_.calls(),
              ElementsAre("abort [r0]", "add r0", "add r1", "abort [r1]", "utility div(4,2)",
                          "add r2", "append r2 last", "step 1"));
  // Both outputs of the step arrive as one batch.
  EXPECT_THAT(sink_.events(), ElementsAre("utility 1 = 2", "step 1: (r0,0) (r2,0)", "shutdown"));
}

// ---------------------------------------------------------------------------
// Further guarantees of the loop.

// Shutdown and fatal are exclusive: a step that fails while a shutdown is pending
// ends the loop with fatal only.
TEST_F(EngineCoreTest, FatalAndShutdownAreExclusive) {
  engine_.FailStep(2);
  engine_.AllowSteps(1);
  ASSERT_TRUE(core_.Submit(CoreMessage::Add(Request("a", 5))));
  StartLoop();
  ASSERT_TRUE(engine_.WaitForStepStarted(2, kDeadline));
  core_.RequestShutdown();
  engine_.AllowSteps(kAllSteps);
  JoinLoop();
  core_.RequestShutdown();
  EXPECT_THAT(sink_.events(), ElementsAre("step 1: (a,4)", "fatal INTERNAL: NCCL timeout"));
}

// A utility error answers that call only; the engine keeps serving.
TEST_F(EngineCoreTest, UtilityErrorDoesNotStopTheEngine) {
  ASSERT_TRUE(core_.Submit(CoreMessage::Add(Request("a", 3))));
  ASSERT_TRUE(core_.Submit(CoreMessage::Utility(1, "div", Args(1, 0))));
  StartLoop();
  ASSERT_TRUE(sink_.WaitFor("step 3: (a,0)", kDeadline));
  ASSERT_TRUE(core_.Submit(CoreMessage::Utility(2, "nope", {})));
  ASSERT_TRUE(sink_.WaitFor("utility 2 error NOT_FOUND: no utility nope", kDeadline));
  ASSERT_TRUE(core_.Submit(CoreMessage::Add(Request("b", 1))));
  ASSERT_TRUE(sink_.WaitFor("step 4: (b,0)", kDeadline));
  core_.RequestShutdown();
  JoinLoop();
  EXPECT_THAT(sink_.events(), ElementsAre("utility 1 error INVALID_ARGUMENT: division by zero",
                                          "step 1: (a,2)", "step 2: (a,1)", "step 3: (a,0)",
                                          "utility 2 error NOT_FOUND: no utility nope",
                                          "step 4: (b,0)", "shutdown"));
}

// An abort's done(true) runs on the loop thread after the engine's Abort() and
// before the next step (queued before the loop starts).
TEST_F(EngineCoreTest, AbortDoneRunsAfterEngineAbortBeforeNextStep) {
  std::atomic<bool> on_loop_thread{false};
  ASSERT_TRUE(core_.Submit(CoreMessage::Add(Request("a", 3))));
  ASSERT_TRUE(core_.Submit(CoreMessage::Add(Request("b", 2))));
  ASSERT_TRUE(core_.Submit(CoreMessage::Abort({"a"}, [&](bool applied) {
    on_loop_thread = std::this_thread::get_id() == loop_id_;
    engine_.Note(absl::StrCat("abort done ", applied));
  })));
  StartLoop();
  ASSERT_TRUE(sink_.WaitFor("step 2: (b,0)", kDeadline));
  core_.RequestShutdown();
  JoinLoop();
  EXPECT_TRUE(on_loop_thread);
  EXPECT_THAT(engine_.calls(),
              ElementsAre("add a", "add b", "abort [a]", "abort done 1", "step 1", "step 2"));
  EXPECT_THAT(sink_.events(), ElementsAre("step 1: (b,1)", "step 2: (b,0)", "shutdown"));
}

// The same while the loop is busy: an abort that arrives during step 2 takes effect
// before step 3, and the aborted request emits nothing more.
TEST_F(EngineCoreTest, AbortDuringAStepTakesEffectBeforeTheNextStep) {
  engine_.AllowSteps(1);
  ASSERT_TRUE(core_.Submit(CoreMessage::Add(Request("a", 5))));
  ASSERT_TRUE(core_.Submit(CoreMessage::Add(Request("b", 5))));
  StartLoop();
  ASSERT_TRUE(engine_.WaitForStepStarted(2, kDeadline));
  ASSERT_TRUE(core_.Submit(CoreMessage::Abort(
      {"a"}, [this](bool applied) { engine_.Note(absl::StrCat("abort done ", applied)); })));
  engine_.AllowSteps(kAllSteps);
  ASSERT_TRUE(sink_.WaitFor("step 5: (b,0)", kDeadline));
  core_.RequestShutdown();
  JoinLoop();
  EXPECT_THAT(engine_.calls(), ElementsAre("add a", "add b", "step 1", "step 2", "abort [a]",
                                           "abort done 1", "step 3", "step 4", "step 5"));
  EXPECT_THAT(sink_.events(),
              ElementsAre("step 1: (a,4) (b,4)", "step 2: (a,3) (b,3)", "step 3: (b,2)",
                          "step 4: (b,1)", "step 5: (b,0)", "shutdown"));
}

// After the loop has ended, Submit() and SubmitAll() refuse messages; an abort's
// done callback then runs at once with false on the submitting thread, and no
// utility result is emitted (the caller answers it).
TEST_F(EngineCoreTest, SubmitAfterTheLoopEndedIsRefused) {
  core_.RequestShutdown();
  StartLoop();
  JoinLoop();
  std::vector<std::pair<int, bool>> done;  // (abort, on this thread), in call order.
  auto done_callback = [&done](int abort) {
    return [&done, abort, caller = std::this_thread::get_id()](bool applied) {
      done.emplace_back(applied ? abort : -abort, std::this_thread::get_id() == caller);
    };
  };
  EXPECT_FALSE(core_.Submit(CoreMessage::Abort({"a"}, done_callback(1))));
  EXPECT_FALSE(core_.Submit(CoreMessage::Utility(3, "div", Args(6, 3))));
  std::vector<CoreMessage> batch;
  batch.push_back(CoreMessage::Add(Request("b", 1)));
  batch.push_back(CoreMessage::Abort({"b"}, done_callback(2)));
  batch.push_back(CoreMessage::Abort({"c"}, done_callback(3)));
  EXPECT_FALSE(core_.SubmitAll(std::move(batch)));
  EXPECT_THAT(done, ElementsAre(std::pair(-1, true), std::pair(-2, true), std::pair(-3, true)));
  EXPECT_THAT(sink_.events(), ElementsAre("shutdown"));
  EXPECT_THAT(engine_.calls(), IsEmpty());
}

// SubmitAll() hands its messages to the loop as one unit: even when they wake a
// blocked loop, ADD r1, ABORT r1, ADD r2 all reach the engine before it steps.
TEST_F(EngineCoreTest, SubmitAllReachesTheEngineBeforeTheNextStep) {
  StartLoop();
  ASSERT_TRUE(engine_.WaitForHasWorkCalls(1, kDeadline));  // On its way to blocking.
  std::vector<CoreMessage> batch;
  batch.push_back(CoreMessage::Add(Request("r1", 3)));
  batch.push_back(CoreMessage::Abort({"r1"}));
  batch.push_back(CoreMessage::Add(Request("r2", 1)));
  ASSERT_TRUE(core_.SubmitAll(std::move(batch)));
  ASSERT_TRUE(sink_.WaitFor("step 1: (r2,0)", kDeadline));
  core_.RequestShutdown();
  JoinLoop();
  EXPECT_THAT(engine_.calls(), ElementsAre("add r1", "abort [r1]", "add r2", "step 1"));
  EXPECT_THAT(sink_.events(), ElementsAre("step 1: (r2,0)", "shutdown"));
}

// Abort and utility messages still queued when a step error ends the loop are
// answered before the fatal event: done(false) and UNAVAILABLE.
TEST_F(EngineCoreTest, QueuedMessagesAreAnsweredWhenAStepErrorEndsTheLoop) {
  std::atomic<int> done_result{-1};
  engine_.FailStep(2);
  engine_.AllowSteps(1);
  ASSERT_TRUE(core_.Submit(CoreMessage::Add(Request("a", 5))));
  StartLoop();
  ASSERT_TRUE(engine_.WaitForStepStarted(2, kDeadline));
  ASSERT_TRUE(core_.Submit(
      CoreMessage::Abort({"a"}, [&done_result](bool applied) { done_result = applied; })));
  ASSERT_TRUE(core_.Submit(CoreMessage::Utility(9, "div", Args(6, 3))));
  engine_.AllowSteps(kAllSteps);
  JoinLoop();
  EXPECT_EQ(done_result, 0);
  EXPECT_THAT(sink_.events(),
              ElementsAre("step 1: (a,4)", StartsWith("utility 9 error UNAVAILABLE"),
                          "fatal INTERNAL: NCCL timeout"));
  EXPECT_THAT(engine_.calls(), ElementsAre("add a", "step 1", "step 2"));
}

// An Add() error is fatal too; the messages after it in the same batch are answered
// (not applied) and nothing is stepped.
TEST_F(EngineCoreTest, AddErrorIsFatalAndTheRestOfTheBatchIsAnswered) {
  std::atomic<int> done_result{-1};
  engine_.FailAdd("bad");
  ASSERT_TRUE(core_.Submit(CoreMessage::Add(Request("a", 1))));
  ASSERT_TRUE(core_.Submit(CoreMessage::Add(Request("bad", 1))));
  ASSERT_TRUE(core_.Submit(CoreMessage::Utility(3, "div", Args(4, 2))));
  ASSERT_TRUE(core_.Submit(
      CoreMessage::Abort({"a"}, [&done_result](bool applied) { done_result = applied; })));
  StartLoop();
  JoinLoop();
  EXPECT_EQ(done_result, 0);
  EXPECT_THAT(engine_.calls(), ElementsAre("add a", "add bad"));
  EXPECT_THAT(sink_.events(), ElementsAre(StartsWith("utility 3 error UNAVAILABLE"),
                                          "fatal INTERNAL: cannot add bad"));
}

// Messages that reach the queue after the loop took its last batch are answered
// when a shutdown ends it (here submitted from the loop thread itself, right after
// the shutdown request, so the order is certain).
TEST_F(EngineCoreTest, QueuedMessagesAreAnsweredWhenShutdownEndsTheLoop) {
  std::atomic<int> done_result{-1};
  // The WAKEUP is what the blocked loop takes; the abort comes with the drain.
  ASSERT_TRUE(core_.Submit(CoreMessage::Wakeup()));
  ASSERT_TRUE(core_.Submit(CoreMessage::Abort({"nobody"}, [&](bool) {
    core_.RequestShutdown();
    core_.Submit(CoreMessage::Utility(5, "div", Args(6, 3)));
    core_.Submit(
        CoreMessage::Abort({"x"}, [&done_result](bool applied) { done_result = applied; }));
  })));
  StartLoop();
  JoinLoop();
  EXPECT_EQ(done_result, 0);
  EXPECT_THAT(sink_.events(), ElementsAre(StartsWith("utility 5 error UNAVAILABLE"), "shutdown"));
  EXPECT_THAT(engine_.calls(), ElementsAre("abort [nobody]"));
}

}  // namespace
}  // namespace omnistage
