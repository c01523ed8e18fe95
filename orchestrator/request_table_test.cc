#include "orchestrator/request_table.h"

#include <memory>

#include "gtest/gtest.h"
#include "tests/fake_response_sink.h"
#include "tests/manual_scheduler.h"

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
  InFlightRequest& r = table.Add(Request("r1", sink));
  r.idle_timer = scheduler.PostAfter(absl::Seconds(30), [] { FAIL() << "timer outlived its request"; });
  table.Finish("r1", v1::Terminal());
  InFlightRequest& s = table.Add(Request("r2", sink));
  s.idle_timer = scheduler.PostAfter(absl::Seconds(30), [] { FAIL() << "timer outlived its request"; });
  table.Remove("r2");
  EXPECT_EQ(scheduler.pending(), 0u);
  scheduler.AdvanceBy(absl::Minutes(1));
}

#ifndef NDEBUG
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
#endif

}  // namespace
}  // namespace omnistage
