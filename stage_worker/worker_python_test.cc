// Threads and the GIL with a Python engine in a worker: every engine call runs
// on the busy-loop thread; an idle loop holds no GIL (the engine's own Python
// threads run) and does not poll; while a step holds the GIL, gRPC threads
// still open sessions, refuse bad requests and answer health checks. And an
// exception in a step reaches every session with its traceback.
#include <unistd.h>

#include <cstdlib>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "stage_worker/testing/worker_service_harness.h"

namespace omnistage {
namespace {

constexpr char kPath[] = "stage_worker/engines/python:stage_worker/engines/python/testdata";

class PythonWorkerTest : public WorkerServiceTest {
 protected:
  void StartPython(const std::string& cls, std::map<std::string, std::string> params = {}) {
    params["path"] = kPath;
    params["module"] = "test_engines";
    params["class"] = cls;
    StartWorkerWith("python", params);
  }

  // A utility's number, through the busy loop.
  static double Number(WorkerTestClient& client, const std::string& name, uint64_t call_id) {
    v1::WorkerCommand command;
    command.mutable_utility()->set_call_id(call_id);
    command.mutable_utility()->set_name(name);
    client.Send(command);
    std::optional<v1::WorkerEvent> result = client.NextWhere(
        [call_id](const v1::WorkerEvent& event) {
          return event.has_utility_result() && event.utility_result().call_id() == call_id;
        },
        absl::Seconds(10));
    if (!result.has_value()) {
      ADD_FAILURE() << "no result of " << name;
      return -1;
    }
    return result->utility_result().value().number_value();
  }
};

TEST_F(PythonWorkerTest, EveryEngineCallRunsOnTheBusyLoopThread) {
  StartPython("Echo");
  std::vector<std::unique_ptr<WorkerTestClient>> clients;
  for (int c = 0; c < 3; ++c) clients.push_back(NewClient());
  std::vector<std::thread> senders;
  for (int c = 0; c < 3; ++c) {
    senders.emplace_back([&, c] {
      for (int i = 0; i < 20; ++i) {
        clients[c]->Add(absl::StrCat("r", i), "text", 1);
        if (i % 5 == 0) (void)clients[c]->Abort({absl::StrCat("r", i)});
      }
    });
  }
  for (std::thread& t : senders) t.join();
  // Every request ends, once: echoed, or stopped by its abort.
  for (int c = 0; c < 3; ++c) {
    std::set<std::string> ended;
    while (ended.size() < 20) {
      std::optional<v1::WorkerEvent> event = clients[c]->Next(absl::Seconds(10));
      ASSERT_TRUE(event.has_value()) << ended.size() << " ended";
      for (const v1::RequestOutput& out : event->step().outputs()) {
        EXPECT_TRUE(out.finished());
        EXPECT_TRUE(ended.insert(out.request_id()).second) << out.request_id();
      }
    }
  }
  EXPECT_EQ(Number(*clients[0], "threads", 1), 1);
}

TEST_F(PythonWorkerTest, IdleLoopLeavesTheGilFreeAndDoesNotPoll) {
  StartWorkerWith("python", {{"path", kPath},
                             {"module", "test_engines"},
                             {"class", "Ticker"}});
  auto client = NewClient();
  const double before = Number(*client, "ticks", 1);
  absl::SleepFor(absl::Milliseconds(300));  // The loop idles, blocked on its queue.
  const double after = Number(*client, "ticks", 2);
  // The engine's thread ticks every ~1 ms while nothing holds the GIL.
  EXPECT_GE(after - before, 50) << before << " -> " << after;

  worker_->RequestShutdown();
  (void)worker_->Wait();
  worker_.reset();
  server_.reset();
  StartPython("Echo");
  auto echo = NewClient();
  const double calls = Number(*echo, "has_work_calls", 3);
  absl::SleepFor(absl::Milliseconds(300));
  // Each utility is one message: a few has_work calls around it, no polling.
  EXPECT_LE(Number(*echo, "has_work_calls", 4) - calls, 3);
}

TEST_F(PythonWorkerTest, GrpcThreadsDoNotWaitForAStepHoldingTheGil) {
  const std::string started = absl::StrCat(std::getenv("TEST_TMPDIR"), "/hog_started");
  StartPython("Echo", {{"output", "gil_hog"}, {"started_file", started}});
  auto client = NewClient();
  client->Add("hog", "x", 1);  // Its step holds the GIL for 3 s ...
  const absl::Time waited = absl::Now() + absl::Seconds(10);
  while (access(started.c_str(), F_OK) != 0 && absl::Now() < waited) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  ASSERT_EQ(access(started.c_str(), F_OK), 0) << "the step never started";  // ... from now.
  const absl::Time start = absl::Now();
  // A new session opens (Ready needs nothing from Python) ...
  auto second = NewClient();
  // ... a request no engine could take is refused on the gRPC thread ...
  v1::WorkerCommand bad;
  bad.mutable_add()->set_request_id("bad");
  bad.mutable_add()->add_input();  // A payload of no kind.
  bad.mutable_add()->set_input_complete(true);
  second->Send(bad);
  std::optional<v1::WorkerEvent> refused = second->Next(absl::Seconds(2));
  ASSERT_TRUE(refused.has_value() && refused->has_rejected()) << "refusal waited for the step";
  EXPECT_EQ(refused->rejected().error().field(), "input[0]");
  // ... and health answers.
  EXPECT_EQ(Health(channel_), grpc::health::v1::HealthCheckResponse::SERVING);
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
  EXPECT_FALSE(client->CollectUntilFinished("hog", absl::Seconds(10)).empty());
}

// An exception in a step is fatal: every session's Fatal event carries its
// type, message and traceback (the worker logs the same reason).
TEST_F(PythonWorkerTest, ExceptionInAStepReachesEverySessionWithItsTraceback) {
  StartPython("Echo", {{"raise_in", "step"}});
  auto a = NewClient();
  auto b = NewClient();
  a->Add("r", "x", 1);
  for (WorkerTestClient* client : {a.get(), b.get()}) {
    std::string reason;
    for (const v1::WorkerEvent& event : client->EventsUntilEnd(absl::Seconds(10))) {
      if (event.has_fatal()) reason = event.fatal().reason();
    }
    EXPECT_NE(reason.find("python engine test_engines.Echo: step raised ValueError: boom in "
                          "step\nTraceback (most recent call last):"),
              std::string::npos)
        << reason;
    EXPECT_NE(reason.find("in explode"), std::string::npos) << reason;
  }
  EXPECT_FALSE(worker_->Wait().ok());
}

}  // namespace
}  // namespace omnistage
