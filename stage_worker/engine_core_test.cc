// Tests for EngineCore, the stage worker's busy loop (docs/architecture.md, Stage worker):
// the guarantees beyond the worked examples and mistakes (those are in
// engine_core_examples_test.cc): fatal versus shutdown, utility errors, abort
// completion, refused submits, SubmitAll, and answering the messages still queued
// when the loop ends. The fakes and the fixture are in testing/engine_core_harness.h.
#include "stage_worker/engine_core.h"

#include <atomic>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "stage_worker/testing/engine_core_harness.h"

namespace omnistage {
namespace engine_core_test {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::StartsWith;

// ---------------------------------------------------------------------------
// Further guarantees of the loop.

// Shutdown and fatal are exclusive: a step that fails while a shutdown is pending
// ends the loop with fatal only.
// The metrics hooks: one per step with its output count and the engine's load
// after it, one per applied abort, and one for each time the loop blocked.
TEST_F(EngineCoreTest, MetricsHooksSeeStepsAbortsAndIdleTime) {
  StartLoop();
  ASSERT_TRUE(core_.Submit(CoreMessage::Add(Request("a", 2))));
  ASSERT_TRUE(sink_.WaitFor("step 2: (a,0)", kDeadline));
  ASSERT_TRUE(core_.Submit(CoreMessage::Add(Request("b", 5))));
  ASSERT_TRUE(sink_.WaitFor("step 3: (b,4)", kDeadline));
  absl::Notification applied;
  ASSERT_TRUE(core_.Submit(CoreMessage::Abort({"b"}, [&](bool) { applied.Notify(); })));
  ASSERT_TRUE(applied.WaitForNotificationWithTimeout(kDeadline));
  core_.RequestShutdown();
  JoinLoop();
  const std::vector<std::string> hooks = sink_.metric_events();
  ASSERT_GE(hooks.size(), 4u);
  EXPECT_EQ(hooks[0], "stepped outputs=1 running=1");
  EXPECT_EQ(hooks[1], "stepped outputs=1 running=0");
  EXPECT_EQ(hooks[2], "stepped outputs=1 running=1");
  EXPECT_THAT(hooks, Contains("aborted ids=1 running=0"));
  // Blocked before "a" arrived and again between "a" and "b".
  EXPECT_GE(sink_.idles(), 2);
}

// A request that resumes by continuation reaches the engine with what it
// already produced (EngineRequest.produced): the loop moves the whole request.
TEST_F(EngineCoreTest, AddHandsTheEngineWhatTheRequestProduced) {
  EngineRequest request = Request("a", 1);
  request.produced.resize(2);
  request.produced[0].mutable_text()->set_text("It was");
  request.produced[1].mutable_tokens()->add_ids(7);
  ASSERT_TRUE(core_.Submit(CoreMessage::Add(std::move(request))));
  StartLoop();
  ASSERT_TRUE(sink_.WaitFor("step 1: (a,0)", kDeadline));
  core_.RequestShutdown();
  JoinLoop();
  EXPECT_THAT(engine_.calls(), Contains("add a produced=2"));
}

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

// Deadlines reach the engine in their place among the other commands.
TEST_F(EngineCoreTest, DeadlinesReachTheEngineInOrder) {
  ASSERT_TRUE(core_.Submit(CoreMessage::Add(Request("a", 1))));
  ASSERT_TRUE(core_.Submit(CoreMessage::Add(Request("b", 1))));
  ASSERT_TRUE(core_.Submit(CoreMessage::Deadlines(
      {{"a", absl::FromUnixMillis(1500)}, {"b", absl::FromUnixMillis(2500)}})));
  StartLoop();
  ASSERT_TRUE(sink_.WaitFor("step 1: (a,0) (b,0)", kDeadline));
  core_.RequestShutdown();
  JoinLoop();
  EXPECT_THAT(engine_.calls(),
              ElementsAre("add a", "add b", "deadline a +1500", "deadline b +2500", "step 1"));
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

// An Add's `taken` callback runs on the loop thread once the engine took the
// request, in queue order with aborts (so an abort applied before it knows the
// request was not there), and not for an Add that failed.
TEST_F(EngineCoreTest, AddTakenRunsAfterTheEngineTookTheRequest) {
  engine_.FailAdd("bad");
  ASSERT_TRUE(
      core_.Submit(CoreMessage::Abort({"a"}, [this](bool) { engine_.Note("abort done"); })));
  ASSERT_TRUE(core_.Submit(CoreMessage::Add(Request("a", 1), [this] { engine_.Note("a taken"); })));
  ASSERT_TRUE(
      core_.Submit(CoreMessage::Add(Request("bad", 1), [this] { engine_.Note("bad taken"); })));
  StartLoop();
  JoinLoop();
  EXPECT_THAT(engine_.calls(),
              ElementsAre("abort [a]", "abort done", "add a", "a taken", "add bad"));
}

// An ADD the engine's in-loop check refuses fails that request only: it is not
// added, its rejected callback (not taken) runs on the loop, and the loop goes
// on. A CHECK runs the same check without adding; after the loop ended it is
// answered OK at once (the session learns why from the loop's end).
TEST_F(EngineCoreTest, InLoopRefusalRejectsOnlyThatRequest) {
  engine_.RefuseInLoop("bad");
  std::vector<std::string> rejected;
  ASSERT_TRUE(core_.Submit(CoreMessage::Add(
      Request("bad", 1), [this] { engine_.Note("bad taken"); },
      [&rejected](const absl::Status& status) { rejected.push_back(status.ToString()); })));
  ASSERT_TRUE(
      core_.Submit(CoreMessage::Add(Request("good", 1), [this] { engine_.Note("good taken"); })));
  ASSERT_TRUE(
      core_.Submit(CoreMessage::Check(Request("bad", 1), [&rejected](const absl::Status& status) {
        rejected.push_back("check: " + status.ToString());
      })));
  StartLoop();
  ASSERT_TRUE(sink_.WaitFor("step 1: (good,0)", kDeadline));
  core_.RequestShutdown();
  JoinLoop();
  EXPECT_THAT(rejected,
              ElementsAre("INVALID_ARGUMENT: refused bad", "check: INVALID_ARGUMENT: refused bad"));
  EXPECT_THAT(engine_.calls(),
              ElementsAre("refuse bad", "add good", "good taken", "refuse bad", "step 1"));
  bool answered = false;
  EXPECT_FALSE(core_.Submit(CoreMessage::Check(
      Request("x", 1), [&answered](const absl::Status& status) { answered = status.ok(); })));
  EXPECT_TRUE(answered);
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
}  // namespace engine_core_test
}  // namespace omnistage
