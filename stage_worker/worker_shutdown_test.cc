// A stage worker's teardown ends every session's stream and returns, whatever
// order its owner destroys the Worker and the WorkerServer in and wherever the
// busy loop is at that moment (ended, running, never started), while clients
// open and close sessions beside it; on the C++ sim_llm and on a Python engine
// with a thread of its own. A stream that outlives its Worker is answered
// UNAVAILABLE and never reaches it (docs/stage_worker.md, "Shutdown").
//
// OMNISTAGE_SHUTDOWN_ROUNDS=N repeats every case N times (default 1); the
// stress run under CPU load is in docs/stage_worker.md.
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "stage_worker/engines/registry.h"
#include "stage_worker/testing/worker_test_client.h"
#include "stage_worker/worker_service.h"

namespace omnistage {
namespace {

enum class Order { kServerFirst, kWorkerFirst };
enum class Loop { kEnded, kRunning, kNeverStarted };

struct Case {
  std::string engine;  // "sim_llm" or "python" (test_engines.Ticker)
  Order order;
  Loop loop;
};

std::string CaseName(const ::testing::TestParamInfo<Case>& info) {
  const Case& c = info.param;
  return absl::StrCat(c.engine == "python" ? "Python" : "SimLlm",
                      c.order == Order::kServerFirst ? "ServerFirst" : "WorkerFirst",
                      c.loop == Loop::kEnded     ? "LoopEnded"
                      : c.loop == Loop::kRunning ? "LoopRunning"
                                                 : "LoopNeverStarted");
}

int Rounds() {
  int rounds = 1;
  const char* env = std::getenv("OMNISTAGE_SHUTDOWN_ROUNDS");
  if (env != nullptr && (!absl::SimpleAtoi(env, &rounds) || rounds < 1)) rounds = 1;
  return rounds;
}

// Runs `fn` on a thread of its own and waits up to `limit`. A teardown that
// does not return is the hang under test: the process cannot go on (the
// objects are still in use), so it says so and aborts.
void WithinOrAbort(const std::string& what, absl::Duration limit, std::function<void()> fn) {
  absl::Notification done;
  std::thread runner([&] {
    fn();
    done.Notify();
  });
  if (!done.WaitForNotificationWithTimeout(limit)) {
    std::fprintf(stderr, "FAILED: %s did not return within %s\n", what.c_str(),
                 absl::FormatDuration(limit).c_str());
    std::abort();
  }
  runner.join();
}

class WorkerShutdownTest : public ::testing::TestWithParam<Case> {
 protected:
  std::unique_ptr<Worker> NewWorker() {
    std::map<std::string, std::string> params = {{"step_time_us", "2000"}};
    if (GetParam().engine == "python") {
      params["path"] = "stage_worker/engines/python:stage_worker/engines/python/testdata";
      params["module"] = "test_engines";
      params["class"] = "Ticker";
    }
    absl::StatusOr<std::unique_ptr<Engine>> engine = CreateEngine(GetParam().engine, params);
    EXPECT_TRUE(engine.ok()) << engine.status();
    if (!engine.ok()) return nullptr;
    WorkerOptions options;
    options.engine_name = GetParam().engine;
    return std::make_unique<Worker>(options, *std::move(engine));
  }

  // Waits (up to 10 s) until `worker`'s busy loop has `n` messages queued.
  static bool QueueReaches(Worker& worker, int n) {
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    while (absl::Now() < deadline) {
      const std::string text = worker.metrics_registry().Render();
      const std::string name = "\nomnistage_worker_input_queue_depth ";
      const size_t at = text.find(name);
      int depth = 0;
      if (at != std::string::npos &&
          absl::SimpleAtoi(text.substr(at + name.size(), text.find('\n', at + 1) - at - name.size()),
                           &depth) &&
          depth >= n) {
        return true;
      }
      absl::SleepFor(absl::Milliseconds(2));
    }
    ADD_FAILURE() << "the busy loop's queue never held " << n << " messages";
    return false;
  }

  // A Hello that the Python engine checks on the busy loop (its defaults).
  static v1::Hello HelloCheckedInLoop() {
    v1::Hello hello;
    hello.mutable_defaults()->set_max_tokens(4);
    return hello;
  }

  void RunRound() {
    const Case c = GetParam();
    std::unique_ptr<Worker> worker = NewWorker();
    ASSERT_NE(worker, nullptr);
    WorkerServerOptions server_options;
    absl::StatusOr<std::unique_ptr<WorkerServer>> started =
        WorkerServer::Start(server_options, worker.get());
    ASSERT_TRUE(started.ok()) << started.status();
    std::unique_ptr<WorkerServer> server = *std::move(started);
    if (c.loop != Loop::kNeverStarted) worker->Start();
    auto channel = grpc::CreateChannel(absl::StrCat("127.0.0.1:", server->port()),
                                       grpc::InsecureChannelCredentials());

    // An idle session, and one with a request running (queued, with no loop).
    WorkerTestClient idle(channel);
    ASSERT_TRUE(idle.Connect().ok());
    WorkerTestClient busy(channel);
    ASSERT_TRUE(busy.Connect().ok());
    busy.Add("long", "a request that outlives the worker", 100000);
    if (c.loop != Loop::kNeverStarted) {
      std::optional<v1::WorkerEvent> first = busy.Next(absl::Seconds(10));
      ASSERT_TRUE(first.has_value() && first->has_step()) << "the request never stepped";
    }
    // With no loop, calls that wait for it: a Hello it is to check (Python),
    // and an Abort it is to apply. Each is queued before the teardown.
    std::optional<absl::Status> waiting_hello, waiting_abort;
    std::thread hello_thread, abort_thread;
    WorkerTestClient waiting(channel);
    if (c.loop == Loop::kNeverStarted) {
      int queued = 1;  // The Add.
      ASSERT_TRUE(QueueReaches(*worker, queued));
      if (c.engine == "python") {
        hello_thread = std::thread([&] { waiting_hello = waiting.Connect(HelloCheckedInLoop()).status(); });
        ASSERT_TRUE(QueueReaches(*worker, ++queued));
      }
      abort_thread = std::thread([&] { waiting_abort = idle.Abort({"nothing"}).status(); });
      ASSERT_TRUE(QueueReaches(*worker, ++queued));
    }

    // Sessions opening (their Hellos checked on the loop where the engine
    // does that), adding, and closing or cancelling, all through the teardown.
    std::atomic<bool> stop{false};
    std::atomic<int> opened{0};
    std::thread churn([&] {
      const absl::Time deadline = absl::Now() + absl::Seconds(60);
      for (int i = 0; !stop.load() && absl::Now() < deadline; ++i) {
        WorkerTestClient client(channel);
        if (!client.Connect(HelloCheckedInLoop()).ok()) continue;
        opened.fetch_add(1);
        client.Add(absl::StrCat("c", i), "churn", 50);
        if (i % 2 == 0) client.CloseWrites();  // Else cancelled as it goes.
      }
    });
    // (With no loop, Python's Hellos wait for it: none opens.)
    if (c.loop != Loop::kNeverStarted || c.engine != "python") {
      const absl::Time deadline = absl::Now() + absl::Seconds(10);
      while (opened.load() < 2 && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(1));
      EXPECT_GE(opened.load(), 2);
    }

    if (c.loop == Loop::kEnded) {
      worker->RequestShutdown();
      EXPECT_TRUE(worker->Wait().ok());
    }
    if (c.order == Order::kServerFirst) {
      // As stage_worker's main does: the server (with a grace), then the worker.
      WithinOrAbort("the server's Shutdown", absl::Seconds(30),
                    [&] { server->Shutdown(absl::Milliseconds(100)); });
      WithinOrAbort("the worker's destructor", absl::Seconds(30), [&] { worker.reset(); });
      server.reset();
    } else {
      WithinOrAbort("the worker's destructor", absl::Seconds(30), [&] { worker.reset(); });
      // The server still runs: every session it served has ended, telling why.
      for (WorkerTestClient* client : {&idle, &busy}) {
        std::optional<grpc::Status> end = client->WaitForEnd(absl::Seconds(10));
        ASSERT_TRUE(end.has_value()) << "a session outlived its worker";
        EXPECT_EQ(end->error_code(), grpc::StatusCode::UNAVAILABLE) << end->error_message();
        EXPECT_EQ(end->error_message(), "stage worker is shutting down");
      }
      // What still arrives is answered, not served by a worker that is gone.
      WorkerTestClient late(channel);
      absl::StatusOr<v1::Ready> ready = late.Connect();
      EXPECT_EQ(ready.status().code(), absl::StatusCode::kUnavailable) << ready.status();
      EXPECT_EQ(idle.Abort({"anything"}).status().code(), absl::StatusCode::kUnavailable);
      WithinOrAbort("the server's destructor", absl::Seconds(30), [&] { server.reset(); });
    }
    stop.store(true);
    WithinOrAbort("the sessions' clients", absl::Seconds(70), [&] { churn.join(); });
    // What waited for the loop was answered: by the worker as it went (its
    // loop ended), or by the server's shutdown (cancelled).
    if (hello_thread.joinable()) {
      hello_thread.join();
      ASSERT_TRUE(waiting_hello.has_value());
      EXPECT_FALSE(waiting_hello->ok());
      if (c.order == Order::kWorkerFirst) {
        EXPECT_EQ(*waiting_hello, absl::UnavailableError("stage worker is shutting down"));
      }
    }
    if (abort_thread.joinable()) {
      abort_thread.join();
      ASSERT_TRUE(waiting_abort.has_value());
      EXPECT_FALSE(waiting_abort->ok());
      if (c.order == Order::kWorkerFirst) {
        EXPECT_EQ(waiting_abort->code(), absl::StatusCode::kUnavailable) << *waiting_abort;
      }
    }
    for (WorkerTestClient* client : {&idle, &busy}) {
      EXPECT_TRUE(client->WaitForEnd(absl::Seconds(10)).has_value()) << "a stream never ended";
    }
  }
};

TEST_P(WorkerShutdownTest, EndsEverySessionAndReturns) {
  const int rounds = Rounds();
  for (int round = 0; round < rounds; ++round) {
    SCOPED_TRACE(absl::StrCat("round ", round + 1, " of ", rounds));
    RunRound();
    if (HasFatalFailure()) return;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Teardowns, WorkerShutdownTest,
    ::testing::Values(Case{"sim_llm", Order::kServerFirst, Loop::kEnded},
                      Case{"sim_llm", Order::kServerFirst, Loop::kRunning},
                      Case{"sim_llm", Order::kServerFirst, Loop::kNeverStarted},
                      Case{"sim_llm", Order::kWorkerFirst, Loop::kEnded},
                      Case{"sim_llm", Order::kWorkerFirst, Loop::kRunning},
                      Case{"sim_llm", Order::kWorkerFirst, Loop::kNeverStarted},
                      Case{"python", Order::kServerFirst, Loop::kEnded},
                      Case{"python", Order::kServerFirst, Loop::kRunning},
                      Case{"python", Order::kServerFirst, Loop::kNeverStarted},
                      Case{"python", Order::kWorkerFirst, Loop::kEnded},
                      Case{"python", Order::kWorkerFirst, Loop::kRunning},
                      Case{"python", Order::kWorkerFirst, Loop::kNeverStarted}),
    CaseName);

}  // namespace
}  // namespace omnistage
