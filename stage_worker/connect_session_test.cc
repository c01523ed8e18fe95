// ConnectSession's event stream: step outputs that queue behind a write in flight go
// out as one event, in order; other events keep their place.
#include "stage_worker/connect_session.h"

#include <atomic>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace omnistage {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAre;

// Records each write as "step N: id,id,..." or the event's kind.
class RecordingTransport : public EventTransport {
 public:
  void BeginWrite(const v1::WorkerEvent* event) override {
    ++in_flight;
    events.push_back(*event);
    if (!event->has_step()) {
      writes.push_back(event->has_stalled() ? "stalled" : event->has_ready() ? "ready" : "other");
      return;
    }
    std::vector<std::string> ids;
    for (const v1::RequestOutput& output : event->step().outputs()) {
      ids.push_back(output.request_id());
    }
    writes.push_back("step " + std::to_string(event->step().step()) + ": " +
                     absl::StrJoin(ids, ","));
  }
  void FinishStream(const absl::Status& status) override {
    writes.push_back("end: " + status.ToString());
  }
  void CancelStream() override {}

  int in_flight = 0;
  std::vector<std::string> writes;
  std::vector<v1::WorkerEvent> events;  // as written
};

v1::WorkerEvent Step(uint64_t step, std::vector<std::string> ids) {
  v1::WorkerEvent event;
  event.mutable_step()->set_step(step);
  for (const std::string& id : ids) event.mutable_step()->add_outputs()->set_request_id(id);
  return event;
}

TEST(SessionTest, StepsQueuedBehindAWriteGoOutAsOneEvent) {
  RecordingTransport transport;
  ConnectSession session(3, "", &transport, 1);
  session.Open(std::nullopt);
  session.Send(Step(1, {"a"}));  // In flight.
  session.Send(Step(2, {"a", "b"}));
  session.Send(Step(3, {"b"}));
  v1::WorkerEvent stalled;
  stalled.mutable_stalled()->set_step(4);
  session.Send(stalled);
  session.Send(Step(0, {"c"}));  // A step-less finish (e.g. an abort).
  session.Send(Step(5, {"a"}));
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(transport.in_flight, 1);
    --transport.in_flight;
    session.OnWriteDone(true);
  }
  EXPECT_THAT(transport.writes,
              ElementsAre("step 1: a", "step 3: a,b,b", "stalled", "step 5: c,a"));
}

// What reaches a session before its Ready is written (a drain, a stall, a
// load broadcast, even its end) is held, then follows Ready in order.
TEST(SessionTest, EventsSentBeforeOpenFollowReady) {
  RecordingTransport transport;
  ConnectSession session(3, "", &transport, 1);
  session.Send(Step(1, {"a"}));
  v1::WorkerEvent stalled;
  stalled.mutable_stalled()->set_step(2);
  session.Send(stalled);
  session.End(absl::UnavailableError("stopping"));
  session.Send(Step(3, {"late"}));  // After the end: dropped.
  EXPECT_TRUE(transport.writes.empty());
  v1::WorkerEvent ready;
  ready.mutable_ready()->set_session_id("3-x");
  session.Open(ready);
  while (transport.in_flight > 0) {
    --transport.in_flight;
    session.OnWriteDone(true);
  }
  EXPECT_THAT(transport.writes,
              ElementsAre("ready", "step 1: a", "stalled", "end: UNAVAILABLE: stopping"));
}

// `event` with a load of `requests` and, if given, the cache report `cache`
// (stored blocks, and evicted ones as negative numbers).
v1::WorkerEvent WithLoad(v1::WorkerEvent event, int requests, bool snapshot = false,
                         std::vector<int> cache = {}) {
  v1::WorkerLoad* load = event.mutable_step()->mutable_load();
  load->set_requests(requests);
  if (!snapshot && cache.empty()) return event;
  load->mutable_cache()->set_snapshot(snapshot);
  for (int block : cache) {
    if (block > 0) load->mutable_cache()->add_stored(block);
    if (block < 0) load->mutable_cache()->add_evicted(-block);
  }
  return event;
}

// Steps merged behind a write in flight keep the last load, and their cache
// reports add up (cache_delta.h): a later change of a block replaces its
// earlier one, a later snapshot everything before it.
TEST(SessionTest, MergedStepsAddUpTheirCacheReports) {
  RecordingTransport transport;
  ConnectSession session(3, "", &transport, 1, /*wants_cache_events=*/true);
  EXPECT_TRUE(session.wants_cache_events());
  session.Open(std::nullopt);
  session.Send(Step(1, {"a"}));  // In flight.
  session.Send(WithLoad(Step(2, {"a"}), 2, false, {1, 2}));
  session.Send(Step(0, {"b"}));  // A step-less finish: no load.
  session.Send(WithLoad(Step(3, {}), 1, false, {3, -1}));
  session.Send(WithLoad(Step(4, {}), 1));  // The load alone.
  --transport.in_flight;
  session.OnWriteDone(true);  // The four merged are in flight.
  session.Send(WithLoad(Step(5, {}), 1, false, {7}));
  session.Send(WithLoad(Step(6, {}), 1, true, {8, 9}));
  session.Send(WithLoad(Step(7, {}), 1, false, {-8, 10}));
  --transport.in_flight;
  session.OnWriteDone(true);
  ASSERT_THAT(transport.writes, ElementsAre("step 1: a", "step 4: a,b", "step 7: "));

  const v1::WorkerLoad& merged = transport.events[1].step().load();
  EXPECT_EQ(merged.requests(), 1);
  EXPECT_FALSE(merged.cache().snapshot());
  EXPECT_THAT(merged.cache().stored(), UnorderedElementsAre(2, 3));
  EXPECT_THAT(merged.cache().evicted(), UnorderedElementsAre(1));

  const v1::WorkerLoad& resnapshot = transport.events[2].step().load();
  EXPECT_TRUE(resnapshot.cache().snapshot());
  EXPECT_THAT(resnapshot.cache().stored(), UnorderedElementsAre(9, 10));
  EXPECT_THAT(resnapshot.cache().evicted(), IsEmpty());
}

TEST(SessionTest, ALargeStepGoesAlone) {
  RecordingTransport transport;
  ConnectSession session(3, "", &transport, 1);
  session.Open(std::nullopt);
  session.Send(Step(1, {"a"}));
  session.Send(Step(2, {"b"}));
  session.Send(Step(3, {std::string(ConnectSession::kMaxMergedEventBytes, 'x')}));
  session.Send(Step(4, {"d"}));
  for (int i = 0; i < 3; ++i) {
    --transport.in_flight;
    session.OnWriteDone(true);
  }
  ASSERT_EQ(transport.writes.size(), 4u);
  EXPECT_EQ(transport.writes[1], "step 2: b");
  EXPECT_EQ(transport.writes[3], "step 4: d");
}

// An event of about `bytes` bytes (one output whose id is that long).
v1::WorkerEvent Sized(size_t bytes) { return Step(1, {std::string(bytes, 'x')}); }

// A transport whose writes complete only when the test says so.
class HeldTransport : public EventTransport {
 public:
  void BeginWrite(const v1::WorkerEvent*) override {}
  void FinishStream(const absl::Status&) override {}
  void CancelStream() override {}
};

TEST(SessionTest, NoWaitWhileTheClientKeepsUp) {
  HeldTransport transport;
  ConnectSession session(1, "", &transport, 1);
  session.Open(std::nullopt);
  session.Send(Sized(1000));  // In flight.
  session.Send(Sized(1000));  // Queued, far under the bound.
  EXPECT_EQ(session.WaitForReader(absl::InfiniteFuture()), absl::ZeroDuration());
}

TEST(SessionTest, AStuckClientIsWaitedForAtMostTheProgressTimeout) {
  HeldTransport transport;
  ConnectSession session(1, "", &transport, 1);
  session.Open(std::nullopt);
  session.Send(Sized(1000));  // In flight, never completes.
  session.Send(Sized(ConnectSession::kBackpressureBytes + 1));
  const absl::Duration waited = session.WaitForReader(absl::Now() + absl::Seconds(30));
  EXPECT_GE(waited, ConnectSession::kReaderProgressTimeout);
  EXPECT_LT(waited, absl::Seconds(30));
}

TEST(SessionTest, ASlowClientIsWaitedForUntilTheBacklogIsUnderTheBound) {
  HeldTransport transport;
  ConnectSession session(1, "", &transport, 1);
  session.Open(std::nullopt);
  session.Send(Sized(1000));  // In flight.
  // Steps that refuse to merge: other events keep their place.
  constexpr int kQueued = 6;
  v1::WorkerEvent big = Sized(ConnectSession::kBackpressureBytes / 4);
  for (int i = 0; i < kQueued; ++i) {
    session.Send(big);
    v1::WorkerEvent stalled;
    stalled.mutable_stalled()->set_step(i);
    session.Send(stalled);
  }
  // The client takes one write every 5 ms, each within the progress timeout.
  std::atomic<int> completed{0};
  std::thread reader([&] {
    for (int i = 0; i < 2 * kQueued; ++i) {
      absl::SleepFor(absl::Milliseconds(5));
      completed.fetch_add(1);
      session.OnWriteDone(true);
    }
  });
  const absl::Duration waited = session.WaitForReader(absl::Now() + absl::Seconds(30));
  const int taken = completed.load();
  reader.join();
  EXPECT_GT(waited, absl::ZeroDuration());
  // It waited until at most 4 quarter-bounds were left queued: at least 3
  // big ones (and the events between them) written.
  EXPECT_GE(taken, 5);
}

}  // namespace
}  // namespace omnistage
