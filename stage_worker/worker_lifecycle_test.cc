// A stage worker's serving state: a fatal engine error and a shutdown reach
// every session and turn health NOT_SERVING; a stalled step is reported, its
// requests are lost, and serving resumes when it returns; a drain lets requests
// finish, then stops the rest.
#include <map>
#include <set>
#include <string>
#include <thread>

#include "gtest/gtest.h"
#include "stage_worker/testing/worker_service_harness.h"

namespace omnistage {
namespace {

TEST_F(WorkerServiceTest, FatalEngineErrorReachesEverySessionAndStopsServing) {
  StartWorker({{"fail_at_step", "3"}});
  EXPECT_EQ(Health(channel_), grpc::health::v1::HealthCheckResponse::SERVING);
  auto a = NewClient();
  auto b = NewClient();
  a->Add("r", "x", 100);
  for (WorkerTestClient* client : {a.get(), b.get()}) {
    bool fatal = false;
    for (const v1::WorkerEvent& event : client->EventsUntilEnd(absl::Seconds(10))) {
      if (event.has_fatal()) {
        fatal = true;
        EXPECT_NE(event.fatal().reason().find("step 3"), std::string::npos)
            << event.fatal().reason();
      }
    }
    EXPECT_TRUE(fatal);
    std::optional<grpc::Status> end = client->WaitForEnd(absl::Seconds(5));
    ASSERT_TRUE(end.has_value());
    EXPECT_EQ(end->error_code(), grpc::StatusCode::UNAVAILABLE);
  }
  EXPECT_FALSE(worker_->Wait().ok());
  EXPECT_EQ(Health(channel_), grpc::health::v1::HealthCheckResponse::NOT_SERVING);
  WorkerTestClient late(channel_);
  EXPECT_EQ(late.Connect().status().code(), absl::StatusCode::kUnavailable);
}

TEST_F(WorkerServiceTest, ShutdownEndsSessionsAndReportsNotServing) {
  StartWorker({{"step_time_us", "1000"}});
  auto client = NewClient();
  client->Add("r", "x", 1000000);
  ASSERT_TRUE(client->Next(absl::Seconds(5)).has_value());
  worker_->RequestShutdown();
  EXPECT_TRUE(worker_->Wait().ok());
  std::optional<grpc::Status> end = client->WaitForEnd(absl::Seconds(5));
  ASSERT_TRUE(end.has_value());
  EXPECT_EQ(end->error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(Health(channel_), grpc::health::v1::HealthCheckResponse::NOT_SERVING);
}

// Steps of 400 ms against a 100 ms stall timeout: each step stalls and returns.
// The session hears of the stall (its live requests are lost, health goes
// NOT_SERVING, new requests are refused) and of the recovery (the lost requests
// end with a finished ABORT, health SERVING again).
TEST_F(WorkerServiceTest, StalledStepIsReportedItsRequestsLostAndServingResumes) {
  StartWorker({{"step_time_us", "400000"}}, 0, 16 << 20,
              StallOptions{absl::Milliseconds(100), absl::ZeroDuration()});
  auto client = NewClient();
  client->Add("slow", "x", 5);
  std::optional<v1::WorkerEvent> event = client->Next(absl::Seconds(10));
  ASSERT_TRUE(event.has_value() && event->has_stalled()) << (event ? event->DebugString() : "");
  EXPECT_EQ(event->stalled().step(), 1u);
  EXPECT_GE(event->stalled().running_ms(), 100);
  EXPECT_EQ(event->stalled().stall_timeout_ms(), 100);
  EXPECT_EQ(worker_->StalledStep(), 1u);
  EXPECT_EQ(Health(channel_), grpc::health::v1::HealthCheckResponse::NOT_SERVING);
  client->Add("refused", "x", 1);

  // The step returns: its outputs, the lost request's end, the refusal and the
  // recovery, in some order on the stream.
  bool recovered = false, slow_aborted = false, refused = false;
  while (!(recovered && slow_aborted && refused)) {
    std::optional<v1::WorkerEvent> next = client->Next(absl::Seconds(10));
    ASSERT_TRUE(next.has_value()) << "recovered=" << recovered << " aborted=" << slow_aborted
                                  << " refused=" << refused;
    if (next->has_recovered()) {
      EXPECT_EQ(next->recovered().step(), 1u);
      EXPECT_GE(next->recovered().took_ms(), 400);
      recovered = true;
    } else if (next->has_rejected()) {
      EXPECT_EQ(next->rejected().request_id(), "refused");
      EXPECT_EQ(next->rejected().error().code(), static_cast<int>(absl::StatusCode::kUnavailable));
      refused = true;
    } else if (next->has_step()) {
      for (const v1::RequestOutput& out : next->step().outputs()) {
        if (!out.finished()) continue;
        EXPECT_EQ(out.request_id(), "slow");
        EXPECT_EQ(out.finish_reason(), v1::FINISH_REASON_ABORT) << out.DebugString();
        EXPECT_EQ(out.error().message(), "lost when step 1 stalled");
        slow_aborted = true;
      }
    }
  }
  EXPECT_EQ(worker_->StalledStep(), 0u);
  EXPECT_EQ(Health(channel_), grpc::health::v1::HealthCheckResponse::SERVING);
  EXPECT_EQ(worker_->live_requests(), 0u);
}

// SIGTERM's graceful end: the sessions hear Draining and health goes
// NOT_SERVING at once; what is running finishes (and what a client still sends
// is served); at the drain timeout the rest is stopped, each request ending on
// its session; then the loop can stop.
TEST_F(WorkerServiceTest, DrainLetsRequestsFinishThenStopsTheRest) {
  StartWorker({{"step_time_us", "2000"}});
  auto client = NewClient();
  client->Add("short", "x", 20);  // About 40 ms.
  client->Add("long", "x", 100000);
  int stopped = -1;
  std::thread drain([&] { stopped = worker_->Drain(absl::Milliseconds(600)); });
  std::optional<v1::WorkerEvent> event;
  do {
    event = client->Next(absl::Seconds(10));
    ASSERT_TRUE(event.has_value());
  } while (!event->has_draining());
  EXPECT_EQ(event->draining().drain_timeout_ms(), 600);
  EXPECT_EQ(Health(channel_), grpc::health::v1::HealthCheckResponse::NOT_SERVING);
  // Liveness stays: a draining worker must not be restarted.
  EXPECT_EQ(Health(channel_, ""), grpc::health::v1::HealthCheckResponse::SERVING);
  client->Add("late", "x", 3);  // Sent before the client could know: still served.
  v1::WorkerCommand ack;
  ack.mutable_drain_ack();
  client->Send(ack);

  std::map<std::string, v1::RequestOutput> ends;
  while (ends.size() < 3) {
    std::optional<v1::WorkerEvent> next = client->Next(absl::Seconds(10));
    ASSERT_TRUE(next.has_value()) << ends.size() << " ended";
    if (!next->has_step()) continue;
    for (const v1::RequestOutput& out : next->step().outputs()) {
      if (out.finished()) ends[out.request_id()] = out;
    }
  }
  drain.join();
  EXPECT_EQ(stopped, 1);
  EXPECT_EQ(ends["short"].finish_reason(), v1::FINISH_REASON_LENGTH);
  EXPECT_EQ(ends["late"].finish_reason(), v1::FINISH_REASON_LENGTH);
  EXPECT_EQ(ends["long"].finish_reason(), v1::FINISH_REASON_ABORT);
  EXPECT_EQ(ends["long"].error().message(),
            "stopped when the worker's drain timeout (600ms) passed");
  EXPECT_EQ(worker_->live_requests(), 0u);

  // A session opened during the drain hears of it after its Ready.
  WorkerTestClient newcomer(channel_);
  ASSERT_TRUE(newcomer.Connect().ok());
  std::optional<v1::WorkerEvent> told = newcomer.Next(absl::Seconds(5));
  ASSERT_TRUE(told.has_value() && told->has_draining());

  worker_->RequestShutdown();
  EXPECT_TRUE(worker_->Wait().ok());
}

// With nothing running, the drain ends as soon as every session acknowledged it
// (after that, nothing more can arrive); a session that never does holds it to
// the timeout.
TEST_F(WorkerServiceTest, DrainEndsWhenEverySessionAcknowledged) {
  StartWorker({});
  auto client = NewClient();
  std::thread acker([&] {
    std::optional<v1::WorkerEvent> event = client->Next(absl::Seconds(10));
    ASSERT_TRUE(event.has_value() && event->has_draining());
    absl::SleepFor(absl::Milliseconds(200));
    v1::WorkerCommand ack;
    ack.mutable_drain_ack();
    client->Send(ack);
  });
  const absl::Time start = absl::Now();
  EXPECT_EQ(worker_->Drain(absl::Seconds(30)), 0);
  const absl::Duration took = absl::Now() - start;
  acker.join();
  EXPECT_GE(took, absl::Milliseconds(200));
  EXPECT_LT(took, absl::Seconds(5));

  auto silent = NewClient();  // Never acknowledges.
  const absl::Time again = absl::Now();
  EXPECT_EQ(worker_->Drain(absl::Milliseconds(300)), 0);
  EXPECT_GE(absl::Now() - again, absl::Milliseconds(300));
}

}  // namespace
}  // namespace omnistage
