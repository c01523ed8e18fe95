// PeerSet against an in-process peer: a probe learns the
// peer's node id, a forwarded Abort carries this node's id and comes back with
// the peer's results, and each answer is handled on the event loop, by the gRPC
// thread that read it when the loop is free (no wake-up of the loop's thread),
// else on the loop's thread once the task before it is done.
#include "orchestrator/peers/peer_set.h"

#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "common/event_loop.h"
#include "common/grpc/grpc_util.h"
#include "common/testing/event_loop_harness.h"
#include "gtest/gtest.h"

namespace omnistage {
namespace {

// Node "node-b": answers a status with its node id at once, an abort with
// every id aborted when the test releases it; remembers who forwarded it.
class AnsweringPeer : public v1::OrchestratorPeer::CallbackService {
 public:
  grpc::ServerUnaryReactor* PeerAbort(grpc::CallbackServerContext* context,
                                      const v1::PeerAbortRequest* request,
                                      v1::AbortResponse* response) override {
    for (const std::string& id : request->request_ids()) {
      v1::AbortResult& result = *response->add_results();
      result.set_request_id(id);
      result.set_outcome(v1::AbortResult::OUTCOME_ABORTED);
    }
    absl::MutexLock lock(&mu_);
    from_node_ = request->from_node();
    ++aborts_;
    held_ = context->DefaultReactor();
    return held_;
  }
  grpc::ServerUnaryReactor* PeerStatus(grpc::CallbackServerContext* context,
                                       const v1::PeerStatusRequest*,
                                       v1::PeerStatusResponse* response) override {
    response->set_node_id("node-b");
    return Answer(context);
  }
  int aborts() {
    absl::MutexLock lock(&mu_);
    return aborts_;
  }
  // Answers the abort held (called once its call came: aborts() == 1).
  void ReleaseAbort() {
    grpc::ServerUnaryReactor* held;
    {
      absl::MutexLock lock(&mu_);
      held = held_;
      held_ = nullptr;
    }
    held->Finish(grpc::Status::OK);
  }
  std::string from_node() {
    absl::MutexLock lock(&mu_);
    return from_node_;
  }

 private:
  static grpc::ServerUnaryReactor* Answer(grpc::CallbackServerContext* context) {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }
  absl::Mutex mu_;
  int aborts_ ABSL_GUARDED_BY(mu_) = 0;
  grpc::ServerUnaryReactor* held_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::string from_node_ ABSL_GUARDED_BY(mu_);
};

// Where and how a forwarded Abort's `done` ran.
struct Answer {
  absl::Notification ran;
  std::thread::id thread;
  bool in_loop = false;
  absl::StatusOr<v1::AbortResponse> response = absl::UnknownError("no answer");
};

class PeerSetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<StartedServer> server = StartGrpcServer({}, {&peer_});
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    address_ = absl::StrCat("127.0.0.1:", server_.port);
    PeerSetOptions options;
    options.self_node = "node-a";
    peers_ = std::make_unique<PeerSet>(options, &loop_);
    thread_.RunAndWait([this] {
      loop_thread_ = std::this_thread::get_id();
      peers_->Apply(std::vector<std::string>{address_});
    });
    // The first probe's answer: the peer's node id.
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    while (NodeId().empty() && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(1));
  }
  void TearDown() override {
    thread_.RunAndWait([this] { peers_->Stop(); });
    server_.server->Shutdown(absl::ToChronoTime(absl::Now()));
  }

  std::string NodeId() {
    std::string id;
    thread_.RunAndWait([&] {
      std::vector<PeerInfo> peers = peers_->Peers();
      if (peers.size() == 1) id = peers[0].node_id;
    });
    return id;
  }
  // Whether the peer has the abort call (within 10 s).
  bool AbortArrived() {
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    while (peer_.aborts() == 0 && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(1));
    return peer_.aborts() == 1;
  }
  // On the loop: forwards an abort of "r1" to the peer.
  void ForwardAbort(Answer* answer) {
    v1::PeerAbortRequest request;
    request.add_request_ids("r1");
    peers_->Abort(address_, request, absl::Now() + absl::Seconds(10),
                  [this, answer](absl::StatusOr<v1::AbortResponse> response) {
                    answer->thread = std::this_thread::get_id();
                    answer->in_loop = loop_.InLoop();
                    answer->response = std::move(response);
                    answer->ran.Notify();
                  });
  }

  EventLoop loop_;
  LoopThread thread_{&loop_};
  std::thread::id loop_thread_;
  AnsweringPeer peer_;
  StartedServer server_;
  std::string address_;
  std::unique_ptr<PeerSet> peers_;
};

TEST_F(PeerSetTest, AnAnswerIsHandledByTheThreadThatReadItWhenTheLoopIsFree) {
  ASSERT_EQ(NodeId(), "node-b");
  Answer answer;
  thread_.RunAndWait([&] { ForwardAbort(&answer); });
  ASSERT_TRUE(AbortArrived());
  WaitUntilFree(&loop_);
  peer_.ReleaseAbort();
  ASSERT_TRUE(answer.ran.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_EQ(peer_.from_node(), "node-a");
  ASSERT_TRUE(answer.response.ok()) << answer.response.status();
  ASSERT_EQ(answer.response->results_size(), 1);
  EXPECT_EQ(answer.response->results(0).outcome(), v1::AbortResult::OUTCOME_ABORTED);
  EXPECT_TRUE(answer.in_loop) << "ran beside the loop, not as its owner";
  EXPECT_NE(answer.thread, loop_thread_) << "handed to the loop's thread, which had to wake";
}

TEST_F(PeerSetTest, AnAnswerWaitsForABusyLoopAndRunsOnItsThreadAfter) {
  ASSERT_EQ(NodeId(), "node-b");
  absl::Notification busy;
  absl::Notification release;
  Answer answer;
  loop_.Post([&] {
    ForwardAbort(&answer);
    busy.Notify();
    release.WaitForNotification();
  });
  busy.WaitForNotification();
  ASSERT_TRUE(AbortArrived());
  peer_.ReleaseAbort();
  // Answered, and read by now in all likelihood: it still waits for the loop.
  EXPECT_FALSE(answer.ran.WaitForNotificationWithTimeout(absl::Milliseconds(100)));
  release.Notify();
  ASSERT_TRUE(answer.ran.WaitForNotificationWithTimeout(absl::Seconds(10)));
  ASSERT_TRUE(answer.response.ok()) << answer.response.status();
  EXPECT_TRUE(answer.in_loop);
  EXPECT_EQ(answer.thread, loop_thread_);
}

}  // namespace
}  // namespace omnistage
