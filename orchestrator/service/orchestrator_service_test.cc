// The Orchestrator service's Abort over a real in-process gRPC server, with an
// AbortRouter whose local aborts record where they ran: on the event loop, and
// by the gRPC thread that read the call when the loop is free (no wake-up of
// the loop's thread); behind the task the loop is running otherwise.
#include "orchestrator/service/orchestrator_service.h"

#include <memory>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "common/grpc/grpc_util.h"
#include "common/testing/event_loop_harness.h"
#include "gtest/gtest.h"

namespace omnistage {
namespace {

class OrchestratorServiceAbortTest : public ::testing::Test {
 protected:
  void SetUp() override {
    thread_.RunAndWait([this] { loop_thread_ = std::this_thread::get_id(); });
    absl::StatusOr<StartedServer> server = StartGrpcServer(GrpcServerOptions(), {&service_});
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(server->server);
    stub_ = v1::Orchestrator::NewStub(grpc::CreateChannel(absl::StrCat("127.0.0.1:", server->port),
                                                          grpc::InsecureChannelCredentials()));
  }
  void TearDown() override { server_->Shutdown(absl::ToChronoTime(absl::Now())); }

  grpc::Status Abort(const std::string& id, v1::AbortResponse* response) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
    v1::AbortRequest request;
    request.add_request_ids(id);
    return stub_->Abort(&context, request, response);
  }

  // The local abort: answers each id as aborted, noting the thread it ran on.
  void LocalAbort(const v1::AbortRequest& request, AbortDone done) {
    {
      absl::MutexLock lock(&mu_);
      ran_on_ = std::this_thread::get_id();
      in_loop_ = loop_.InLoop();
    }
    v1::AbortResponse response;
    for (const std::string& id : request.request_ids()) {
      v1::AbortResult& result = *response.add_results();
      result.set_request_id(id);
      result.set_outcome(v1::AbortResult::OUTCOME_ABORTED);
    }
    done(response);
  }

  EventLoop loop_;
  LoopThread thread_{&loop_};
  std::thread::id loop_thread_;
  absl::Mutex mu_;
  std::thread::id ran_on_ ABSL_GUARDED_BY(mu_);
  bool in_loop_ ABSL_GUARDED_BY(mu_) = false;
  ClientAuth auth_{nullptr, /*require_tls=*/false};  // No tokens: every call is let in.
  AbortRouter router_{
      "node-a",
      LocalAborts{[](const std::string&, const Caller&) { return true; },
                  [this](const v1::AbortRequest& request, absl::Time, AbortDone done,
                         const Caller&) { LocalAbort(request, std::move(done)); }},
      /*peers=*/nullptr, absl::Seconds(1), &loop_};
  // No core: with no tokens nothing is refused, and an Abort goes to the router.
  OrchestratorService service_{nullptr, &loop_, &auth_, &router_, nullptr, absl::Seconds(1)};
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::Orchestrator::Stub> stub_;
};

TEST_F(OrchestratorServiceAbortTest, AnAbortRunsOnTheThreadThatReadItWhenTheLoopIsFree) {
  WaitUntilFree(&loop_);  // And nothing else reaches it.
  v1::AbortResponse response;
  const grpc::Status status = Abort("r1", &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(response.results_size(), 1);
  EXPECT_EQ(response.results(0).request_id(), "r1");
  EXPECT_EQ(response.results(0).outcome(), v1::AbortResult::OUTCOME_ABORTED);
  absl::MutexLock lock(&mu_);
  EXPECT_TRUE(in_loop_) << "ran beside the loop, not as its owner";
  EXPECT_NE(ran_on_, loop_thread_) << "handed to the loop's thread, which had to wake";
  EXPECT_NE(ran_on_, std::this_thread::get_id());
}

TEST_F(OrchestratorServiceAbortTest, AnAbortWaitsForABusyLoopAndRunsOnItsThreadAfter) {
  absl::Notification busy;
  absl::Notification release;
  loop_.Post([&] {
    busy.Notify();
    release.WaitForNotification();
  });
  busy.WaitForNotification();
  v1::AbortResponse response;
  grpc::Status status;
  std::thread client([&] { status = Abort("r2", &response); });
  absl::SleepFor(absl::Milliseconds(100));
  {
    absl::MutexLock lock(&mu_);
    EXPECT_EQ(ran_on_, std::thread::id()) << "ran while the loop was busy";
  }
  release.Notify();
  client.join();
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(response.results_size(), 1);
  EXPECT_EQ(response.results(0).outcome(), v1::AbortResult::OUTCOME_ABORTED);
  absl::MutexLock lock(&mu_);
  EXPECT_TRUE(in_loop_);
  EXPECT_EQ(ran_on_, loop_thread_);
}

}  // namespace
}  // namespace omnistage
