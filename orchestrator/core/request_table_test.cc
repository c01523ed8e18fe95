#include "orchestrator/core/request_table.h"

#include <memory>

#include "common/invariant.h"
#include "common/testing/manual_scheduler.h"
#include "gtest/gtest.h"
#include "orchestrator/core/testing/fake_response_sink.h"

namespace omnistage {
namespace {

std::unique_ptr<InFlightRequest> Request(const std::string& id,
                                         std::shared_ptr<FakeResponseSink> sink) {
  auto r = std::make_unique<InFlightRequest>();
  r->id = id;
  r->sink = std::move(sink);
  return r;
}

TEST(RequestTableTest, FinishSendsTheOneTerminalAndForgetsTheRequest) {
  ManualScheduler scheduler;
  RequestTable table(&scheduler);
  auto sink = std::make_shared<FakeResponseSink>();
  table.Add(Request("r1", sink));
  ASSERT_NE(table.Find("r1"), nullptr);
  v1::Terminal terminal;
  terminal.set_finish_reason(v1::FINISH_REASON_STOP);
  table.Finish("r1", terminal);
  EXPECT_EQ(table.Find("r1"), nullptr);
  EXPECT_TRUE(table.empty());
  EXPECT_EQ(sink->terminal_count(), 1);
  EXPECT_EQ(sink->terminal_id(), "r1");
}

TEST(RequestTableTest, EndingARequestCancelsItsIdleTimer) {
  ManualScheduler scheduler;
  RequestTable table(&scheduler);
  auto sink = std::make_shared<FakeResponseSink>();
  InFlightRequest& r = *table.Add(Request("r1", sink));
  r.idle_timer =
      scheduler.PostAfter(absl::Seconds(30), [] { FAIL() << "timer outlived its request"; });
  table.Finish("r1", v1::Terminal());
  InFlightRequest& s = *table.Add(Request("r2", sink));
  s.idle_timer =
      scheduler.PostAfter(absl::Seconds(30), [] { FAIL() << "timer outlived its request"; });
  table.Remove("r2");
  EXPECT_EQ(scheduler.pending(), 0u);
  scheduler.AdvanceBy(absl::Minutes(1));
}

TEST(RequestTableDeathTest, ASecondTerminalCrashes) {
  ManualScheduler scheduler;
  RequestTable table(&scheduler);
  table.Add(Request("r1", std::make_shared<FakeResponseSink>()));
  table.Finish("r1", v1::Terminal());
  EXPECT_DEATH(table.Finish("r1", v1::Terminal()),
               "a second terminal for a request that already ended");
}

TEST(RequestTableDeathTest, AdmittingAnIdInFlightCrashes) {
  ManualScheduler scheduler;
  RequestTable table(&scheduler);
  table.Add(Request("r1", std::make_shared<FakeResponseSink>()));
  EXPECT_DEATH(table.Add(Request("r1", std::make_shared<FakeResponseSink>())),
               "admitted while already in flight");
}

// An optimized build: the broken invariant fails the request it concerns, the
// one in flight goes on, and a second terminal is dropped.
TEST(RequestTableTest, ABrokenInvariantFailsOnlyTheRequestItConcerns) {
  SetInvariantMode(InvariantMode::kReport);
  ManualScheduler scheduler;
  RequestTable table(&scheduler);
  auto first = std::make_shared<FakeResponseSink>();
  auto second = std::make_shared<FakeResponseSink>();
  const uint64_t before = InvariantViolations();
  ASSERT_NE(table.Add(Request("r1", first)), nullptr);
  EXPECT_EQ(table.Add(Request("r1", second)), nullptr);
  EXPECT_EQ(second->fail_count(), 1);
  EXPECT_EQ(second->fail_status().code(), absl::StatusCode::kInternal);
  EXPECT_EQ(table.Find("r1")->sink, first);
  EXPECT_EQ(table.InFlightOf(""), 1);
  table.Finish("r1", v1::Terminal());
  table.Finish("r1", v1::Terminal());
  EXPECT_EQ(first->terminal_count(), 1);
  EXPECT_EQ(InvariantViolations(), before + 2);
  SetInvariantMode(InvariantMode::kCrash);
}

// The requests that want audio and run (not queued), kept as they come, wait
// and end.
TEST(RequestTableTest, CountsTheRunningRequestsThatWantAudio) {
  ManualScheduler scheduler;
  RequestTable table(&scheduler);
  auto sink = std::make_shared<FakeResponseSink>();
  auto audio = [&](const std::string& id) {
    std::unique_ptr<InFlightRequest> r = Request(id, sink);
    r->wants_audio = true;
    return r;
  };
  table.Add(Request("text", sink));
  InFlightRequest& a = *table.Add(audio("a"));
  InFlightRequest& b = *table.Add(audio("b"));
  EXPECT_EQ(table.running_audio(), 2);
  table.SetQueued(b, true);
  table.SetQueued(b, true);  // Already queued: counted once.
  EXPECT_EQ(table.running_audio(), 1);
  table.Remove("b");  // Ended while queued.
  EXPECT_EQ(table.running_audio(), 1);
  table.SetQueued(a, true);
  table.SetQueued(a, false);
  EXPECT_EQ(table.running_audio(), 1);
  table.Finish("a", v1::Terminal());
  table.Remove("text");
  EXPECT_EQ(table.running_audio(), 0);
}

}  // namespace
}  // namespace omnistage
