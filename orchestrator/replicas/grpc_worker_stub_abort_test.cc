// GrpcWorkerStub's unary Abort against an in-process worker that answers at
// once: the answer is handled on the event loop, by the gRPC thread that read
// it when the loop is free (no wake-up of the loop's thread), else on the
// loop's thread once the task before it is done.
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "common/event_loop.h"
#include "common/grpc/grpc_util.h"
#include "common/testing/event_loop_harness.h"
#include "gtest/gtest.h"
#include "orchestrator/replicas/grpc_worker_stub.h"
#include "protos/stage_worker.grpc.pb.h"

namespace omnistage {
namespace {

// Answers every Abort at once, naming each id as aborted; counts the answers.
class AnsweringWorker : public v1::StageWorker::CallbackService {
 public:
  grpc::ServerUnaryReactor* Abort(grpc::CallbackServerContext* context,
                                  const v1::WorkerAbortRequest* request,
                                  v1::WorkerAbortResponse* response) override {
    for (const std::string& id : request->request_ids()) response->add_aborted_ids(id);
    {
      absl::MutexLock lock(&mu_);
      ++answered_;
    }
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }
  int answered() {
    absl::MutexLock lock(&mu_);
    return answered_;
  }

 private:
  absl::Mutex mu_;
  int answered_ ABSL_GUARDED_BY(mu_) = 0;
};

// Where and how an Abort's `done` ran.
struct Answer {
  absl::Notification ran;
  std::thread::id thread;
  bool in_loop = false;
  std::vector<std::string> aborted;
};

class GrpcWorkerStubAbortTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<StartedServer> server = StartGrpcServer({}, {&worker_});
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    WorkerChannelOptions options;
    options.address = "127.0.0.1:" + std::to_string(server_.port);
    options.keepalive_time = absl::Seconds(30);
    stub_ = std::make_unique<GrpcWorkerStub>(options, &loop_);
    thread_.RunAndWait([this] { loop_thread_ = std::this_thread::get_id(); });
  }
  void TearDown() override {
    stub_->Shutdown();
    server_.server->Shutdown(absl::ToChronoTime(absl::Now()));
  }

  // Aborts "r1" and "r2" through the stub; `answer` hears how it ended.
  void AbortTwo(Answer* answer) {
    v1::WorkerAbortRequest request;
    request.add_request_ids("r1");
    request.add_request_ids("r2");
    stub_->Abort(request, absl::Now() + absl::Seconds(10),
                 [this, answer](absl::StatusOr<v1::WorkerAbortResponse> response) {
                   answer->thread = std::this_thread::get_id();
                   answer->in_loop = loop_.InLoop();
                   if (response.ok()) {
                     answer->aborted.assign(response->aborted_ids().begin(),
                                            response->aborted_ids().end());
                   }
                   answer->ran.Notify();
                 });
  }

  EventLoop loop_;  // Outlives the stub, whose answers may still reach it.
  LoopThread thread_{&loop_};
  std::thread::id loop_thread_;
  AnsweringWorker worker_;
  StartedServer server_;
  std::unique_ptr<GrpcWorkerStub> stub_;
};

TEST_F(GrpcWorkerStubAbortTest, AnAnswerIsHandledByTheThreadThatReadItWhenTheLoopIsFree) {
  WaitUntilFree(&loop_);  // And nothing else reaches it.
  Answer answer;
  AbortTwo(&answer);
  ASSERT_TRUE(answer.ran.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_TRUE(answer.in_loop) << "ran beside the loop, not as its owner";
  EXPECT_NE(answer.thread, loop_thread_) << "handed to the loop's thread, which had to wake";
  EXPECT_NE(answer.thread, std::this_thread::get_id());
  EXPECT_EQ(answer.aborted, (std::vector<std::string>{"r1", "r2"}));
}

TEST_F(GrpcWorkerStubAbortTest, AnAnswerWaitsForABusyLoopAndRunsOnItsThreadAfter) {
  absl::Notification busy;
  absl::Notification release;
  bool busy_done = false;
  loop_.Post([&] {
    busy.Notify();
    release.WaitForNotification();
    busy_done = true;
  });
  busy.WaitForNotification();
  Answer answer;
  AbortTwo(&answer);
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (worker_.answered() == 0 && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(1));
  ASSERT_EQ(worker_.answered(), 1);
  // Answered, and read by now in all likelihood: it still waits for the loop.
  EXPECT_FALSE(answer.ran.WaitForNotificationWithTimeout(absl::Milliseconds(100)));
  release.Notify();
  ASSERT_TRUE(answer.ran.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_TRUE(answer.in_loop);
  EXPECT_EQ(answer.thread, loop_thread_);
  thread_.RunAndWait([&] { EXPECT_TRUE(busy_done); });
  EXPECT_EQ(answer.aborted, (std::vector<std::string>{"r1", "r2"}));
}

}  // namespace
}  // namespace omnistage
