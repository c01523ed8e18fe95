// Tests for EngineCore, the stage worker's busy loop (docs/architecture.md, Stage worker):
// its worked examples 1-3 and one test per mistake a busy loop must not make
// (docs/architecture.md, Worked examples). The
// loop's further guarantees are in engine_core_test.cc; the fakes and the fixture
// are in testing/engine_core_harness.h.
//
// Sleeps appear only where the example is itself timed (examples 1 and 3,
// and the idle-polling check).
#include <string>
#include <thread>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "stage_worker/engine_core.h"
#include "stage_worker/testing/engine_core_harness.h"

namespace omnistage {
namespace engine_core_test {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

// ---------------------------------------------------------------------------
// The worked examples.

// Example 1: pre-queued ADD a(2), ADD b(1), UTILITY 7 div(1,0), ABORT [b],
// UTILITY 8 div(6,3); ~200 ms later ADD c(1); ~200 ms later request_shutdown.
TEST_F(EngineCoreTest, Example1PrequeuedMessagesLateAddThenShutdown) {
  SubmitExample1Prequeue();
  StartLoop();
  ASSERT_TRUE(sink_.WaitFor("step 2: (a,0)", kDeadline));
  absl::SleepFor(absl::Milliseconds(200));  // The example's timing: the loop sits idle.
  ASSERT_TRUE(core_.Submit(CoreMessage::Add(Request("c", 1))));
  ASSERT_TRUE(sink_.WaitFor("step 3: (c,0)", kDeadline));
  absl::SleepFor(absl::Milliseconds(200));
  core_.RequestShutdown();
  JoinLoop();

  EXPECT_THAT(sink_.events(),
              ElementsAre("utility 7 error INVALID_ARGUMENT: division by zero", "utility 8 = 2",
                          "step 1: (a,1)", "step 2: (a,0)", "step 3: (c,0)", "shutdown"));
  // The example lists add a, add b, abort [b], step 1, ...; the fake also logs the
  // utilities, which must sit in their FIFO places too.
  EXPECT_THAT(engine_.calls(),
              ElementsAre("add a", "add b", "utility div(1,0)", "abort [b]", "utility div(6,3)",
                          "step 1", "step 2", "add c", "step 3"));
  // A loop that does not poll makes single-digit calls.
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
  absl::SleepFor(absl::Milliseconds(500));  // The example: idle a while.
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
// One test per mistake a busy loop must not make.

// Mistake: get(timeout=...) polling. Once the work is done the loop blocks; it
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

// Mistake: the flag without a WAKEUP. A loop blocked on the empty queue wakes at
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

// Mistake: dropping the message the blocking get returned. The single ADD that
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

// Mistake: one message per step. ADD r1, ABORT r1, ADD r2 queued together all
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

// Mistake: an uncaught step error. The loop reports fatal and Run() returns.
TEST_F(EngineCoreTest, StepErrorEmitsFatalAndEndsTheLoop) {
  engine_.FailStep(1);
  ASSERT_TRUE(core_.Submit(CoreMessage::Add(Request("a", 2))));
  StartLoop();
  JoinLoop();
  EXPECT_THAT(sink_.events(), ElementsAre("fatal INTERNAL: NCCL timeout"));
  EXPECT_THAT(engine_.calls(), ElementsAre("add a", "step 1"));
  EXPECT_FALSE(core_.Submit(CoreMessage::Add(Request("b", 1))));
}

// Mistake: a step after shutdown. A shutdown requested while the loop applies its
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

// Same mistake: work queued but shutdown already requested when the loop starts.
TEST_F(EngineCoreTest, NoStepWhenShutdownWasRequestedBeforeRun) {
  ASSERT_TRUE(core_.Submit(CoreMessage::Add(Request("a", 3))));
  core_.RequestShutdown();
  StartLoop();
  JoinLoop();
  EXPECT_EQ(engine_.steps_started(), 0u);
  EXPECT_THAT(sink_.events(), ElementsAre("shutdown"));
}

// Same mistake: a shutdown that arrives during a step lets that step finish and
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

// Mistake: sorting messages by kind (all ADDs, then all ABORTs, ...). Every kind
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

}  // namespace
}  // namespace engine_core_test
}  // namespace omnistage
