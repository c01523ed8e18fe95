// A session's opening: it is registered before anything is sent on it and
// Ready is still its first event, so that an Abort sent the moment Ready
// arrives finds it, and a drain racing the opening reaches it exactly once.
#include <atomic>
#include <functional>
#include <optional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"
#include "stage_worker/testing/worker_service_harness.h"

namespace omnistage {
namespace {

// A transport whose client acts inside the write of Ready, before the worker
// has returned from starting the session: the tightest a real client can be.
// Other writes complete at once; the events are recorded.
class EagerClientTransport : public EventTransport {
 public:
  std::function<void()> on_ready;

  void BeginWrite(const v1::WorkerEvent* event) override {
    {
      absl::MutexLock lock(&mu_);
      events_.push_back(*event);
    }
    if (event->has_ready() && on_ready) on_ready();
    // Completed by the test (Pump), as gRPC completes a write later.
    absl::MutexLock lock(&mu_);
    ++pending_;
  }
  void FinishStream(const absl::Status& status) override {
    absl::MutexLock lock(&mu_);
    finished_ = status;
  }
  void CancelStream() override {}

  // Completes writes until none is in flight.
  void Pump(ConnectSession& session) {
    for (;;) {
      {
        absl::MutexLock lock(&mu_);
        if (pending_ == 0) return;
        --pending_;
      }
      session.OnWriteDone(true);
    }
  }
  std::vector<v1::WorkerEvent> events() {
    absl::MutexLock lock(&mu_);
    return events_;
  }

 private:
  absl::Mutex mu_;
  std::vector<v1::WorkerEvent> events_ ABSL_GUARDED_BY(mu_);
  int pending_ ABSL_GUARDED_BY(mu_) = 0;
  std::optional<absl::Status> finished_ ABSL_GUARDED_BY(mu_);
};

TEST_F(WorkerServiceTest, AbortSentTheMomentReadyIsWrittenFindsTheRequest) {
  StartWorker({{"step_time_us", "1000"}});
  EagerClientTransport transport;
  absl::StatusOr<std::shared_ptr<ConnectSession>> session =
      worker_->OpenSession(v1::Hello(), 1, &transport);
  ASSERT_TRUE(session.ok()) << session.status();
  absl::Notification answered;
  absl::StatusOr<std::vector<std::string>> aborted;
  transport.on_ready = [&] {
    v1::WorkerCommand add;
    add.set_seq(2);
    add.mutable_add()->set_request_id("r");
    add.mutable_add()->add_input()->mutable_text()->set_text("long");
    add.mutable_add()->set_input_complete(true);
    add.mutable_add()->mutable_params()->set_max_tokens(1000000);
    worker_->HandleCommand(**session, add);
    v1::WorkerAbortRequest abort;
    abort.set_session_id((*session)->id());
    abort.add_request_ids("r");
    abort.set_after_seq(2);
    worker_->Abort(abort, [&](absl::StatusOr<std::vector<std::string>> result) {
      aborted = std::move(result);
      answered.Notify();
    });
  };
  worker_->StartSession(*session);
  ASSERT_TRUE(answered.WaitForNotificationWithTimeout(absl::Seconds(10)));
  ASSERT_TRUE(aborted.ok()) << aborted.status();
  EXPECT_EQ(*aborted, std::vector<std::string>{"r"});
  EXPECT_EQ(worker_->live_requests(), 0u);
  transport.Pump(**session);
  std::vector<v1::WorkerEvent> events = transport.events();
  ASSERT_FALSE(events.empty());
  EXPECT_TRUE(events.front().has_ready());
  worker_->CloseSession(**session);
  transport.Pump(**session);
}

// Through gRPC, many times over: each session's first request is added and
// aborted (fenced after the add) the moment its Ready arrives.
TEST_F(WorkerServiceTest, AbortRightAfterReadyNeverMissesTheRequest) {
  StartWorker({{"batch_size", "4"}, {"step_time_us", "200"}});
  for (int i = 0; i < 300; ++i) {
    WorkerTestClient client(channel_);
    ASSERT_TRUE(client.Connect().ok()) << "session " << i;
    client.Add("r", "long", 1000000);
    absl::StatusOr<std::vector<std::string>> aborted = client.Abort({"r"});
    ASSERT_TRUE(aborted.ok()) << "session " << i << ": " << aborted.status();
    ASSERT_EQ(*aborted, std::vector<std::string>{"r"}) << "session " << i;
  }
  EXPECT_EQ(worker_->live_requests(), 0u);
}

// Sessions open while a drain starts: every one hears Draining exactly once,
// after its Ready, and the drain ends once each has acknowledged.
TEST_F(WorkerServiceTest, DrainRacingSessionOpensReachesEachExactlyOnce) {
  StartWorker({});
  constexpr int kSessions = 120;
  std::vector<std::unique_ptr<WorkerTestClient>> clients(kSessions);
  std::atomic<int> opened{0};
  std::thread opener([&] {
    for (int i = 0; i < kSessions; ++i) {
      clients[i] = std::make_unique<WorkerTestClient>(channel_);
      absl::StatusOr<v1::Ready> ready = clients[i]->Connect();
      EXPECT_TRUE(ready.ok()) << "session " << i << ": " << ready.status();
      opened.fetch_add(1);
    }
  });
  while (opened.load() < kSessions / 4) absl::SleepFor(absl::Milliseconds(1));
  int stopped = -1;
  std::thread drain([&] { stopped = worker_->Drain(absl::Seconds(60)); });
  opener.join();
  for (int i = 0; i < kSessions; ++i) {
    int draining = 0;
    // Events until the drain notice, then acknowledge it.
    while (draining == 0) {
      std::optional<v1::WorkerEvent> event = clients[i]->Next(absl::Seconds(10));
      ASSERT_TRUE(event.has_value()) << "session " << i << " never heard of the drain";
      ASSERT_FALSE(event->has_ready()) << "session " << i << ": a second Ready";
      if (event->has_draining()) ++draining;
    }
    v1::WorkerCommand ack;
    ack.mutable_drain_ack();
    clients[i]->Send(ack);
  }
  drain.join();
  EXPECT_EQ(stopped, 0);
  for (int i = 0; i < kSessions; ++i) {
    for (const v1::WorkerEvent& event :
         clients[i]->EventsUntilEnd(absl::Seconds(10), absl::Milliseconds(20))) {
      EXPECT_FALSE(event.has_draining()) << "session " << i << " heard of the drain twice";
    }
  }
}

}  // namespace
}  // namespace omnistage
