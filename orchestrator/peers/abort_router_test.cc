#include "orchestrator/peers/abort_router.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "common/testing/manual_scheduler.h"
#include "gtest/gtest.h"
#include "orchestrator/core/abort_coordinator.h"
#include "orchestrator/core/request_id.h"

namespace omnistage {
namespace {

using Outcome = v1::AbortResult::Outcome;

// Peers whose answers the test scripts: each peer aborts the ids in its
// `holds`, or fails the whole call with `down`.
class FakePeers : public PeerCalls {
 public:
  struct Fake {
    PeerInfo info;
    absl::flat_hash_set<std::string> holds;
    absl::Status down;
    // What it was asked.
    std::vector<v1::PeerAbortRequest> calls;
    std::vector<absl::Time> deadlines;
  };
  explicit FakePeers(Scheduler* loop) : loop_(loop) {}

  Fake& Add(const std::string& address, const std::string& node) {
    Fake& fake = peers_[address];
    fake.info.address = address;
    fake.info.node_id = node;
    return fake;
  }
  Fake& at(const std::string& address) { return peers_.at(address); }

  std::vector<PeerInfo> Peers() const override {
    std::vector<PeerInfo> infos;
    for (const auto& [address, fake] : peers_) infos.push_back(fake.info);
    return infos;
  }
  void Abort(const std::string& address, v1::PeerAbortRequest request, absl::Time deadline,
             std::function<void(absl::StatusOr<v1::AbortResponse>)> done) override {
    Fake& fake = peers_.at(address);
    fake.calls.push_back(request);
    fake.deadlines.push_back(deadline);
    if (!fake.down.ok()) {
      loop_->Post([done, down = fake.down] { done(down); });
      return;
    }
    v1::AbortResponse response;
    for (const std::string& id : request.request_ids()) {
      v1::AbortResult* result = response.add_results();
      result->set_request_id(id);
      result->set_outcome(fake.holds.contains(id) ? v1::AbortResult::OUTCOME_ABORTED
                                                  : v1::AbortResult::OUTCOME_NOT_FOUND);
    }
    loop_->Post([done, response] { done(response); });
  }
  void Status(const std::string&, absl::Time,
              std::function<void(absl::StatusOr<v1::PeerStatusResponse>)> done) override {
    done(absl::UnimplementedError("not in this test"));
  }

 private:
  Scheduler* const loop_;
  std::map<std::string, Fake> peers_;
};

class AbortRouterTest : public ::testing::Test {
 protected:
  AbortRouterTest()
      : peers_(&loop_),
        router_(kSelf,
                LocalAborts{[this](const std::string& id, const Caller& caller) {
                              return local_holds_.contains(id) &&
                                     (caller.identity == "alice" || caller.abort_any);
                            },
                            [this](const v1::AbortRequest& request, absl::Time,
                                   AbortDone done, const Caller& caller) {
                              local_calls_.push_back(request);
                              v1::AbortResponse response;
                              for (const std::string& id : request.request_ids()) {
                                v1::AbortResult* result = response.add_results();
                                result->set_request_id(id);
                                result->set_outcome(local_holds_.contains(id) &&
                                                            (caller.identity == "alice" ||
                                                             caller.abort_any)
                                                        ? v1::AbortResult::OUTCOME_ABORTED
                                                        : v1::AbortResult::OUTCOME_NOT_FOUND);
                              }
                              done(response);
                            }},
                &peers_, absl::Seconds(5), &loop_) {}

  // Aborts `ids` as alice (or as `caller`); the outcomes in order.
  std::vector<Outcome> AbortAs(const std::vector<std::string>& ids,
                               absl::Time deadline = absl::InfiniteFuture(),
                               std::vector<v1::AbortResult>* results = nullptr,
                               const Caller& caller = Caller::Of("alice", false, false)) {
    v1::AbortRequest request;
    for (const std::string& id : ids) request.add_request_ids(id);
    std::optional<absl::StatusOr<v1::AbortResponse>> answer;
    router_.Abort(request, deadline, [&](absl::StatusOr<v1::AbortResponse> r) { answer = r; },
                  caller);
    loop_.RunPending();
    EXPECT_TRUE(answer.has_value() && answer->ok());
    std::vector<Outcome> outcomes;
    if (!answer.has_value() || !answer->ok()) return outcomes;
    EXPECT_EQ((*answer)->results_size(), static_cast<int>(ids.size()));
    for (int i = 0; i < (*answer)->results_size(); ++i) {
      EXPECT_EQ((*answer)->results(i).request_id(), ids[i]);
      outcomes.push_back((*answer)->results(i).outcome());
      if (results != nullptr) results->push_back((*answer)->results(i));
    }
    return outcomes;
  }

  static constexpr char kSelf[] = "00000000000a";
  ManualScheduler loop_;
  FakePeers peers_;
  absl::flat_hash_set<std::string> local_holds_;
  std::vector<v1::AbortRequest> local_calls_;
  AbortRouter router_;
};

constexpr Outcome kAborted = v1::AbortResult::OUTCOME_ABORTED;
constexpr Outcome kNotFound = v1::AbortResult::OUTCOME_NOT_FOUND;
constexpr Outcome kFailed = v1::AbortResult::OUTCOME_FAILED;

TEST_F(AbortRouterTest, AloneEverythingIsLocal) {
  local_holds_ = {"a"};
  EXPECT_EQ(AbortAs({"a", "b", GeneratedRequestId("00000000000b")}),
            (std::vector<Outcome>{kAborted, kNotFound, kNotFound}));
  ASSERT_EQ(local_calls_.size(), 1u);
  EXPECT_EQ(local_calls_[0].request_ids_size(), 3);
}

TEST_F(AbortRouterTest, AGeneratedIdGoesToItsOwnerOnly) {
  FakePeers::Fake& b = peers_.Add("10.0.0.2:50052", "00000000000b");
  FakePeers::Fake& c = peers_.Add("10.0.0.3:50052", "00000000000c");
  const std::string on_b = GeneratedRequestId("00000000000b");
  const std::string also_on_b = GeneratedRequestId("00000000000b");
  b.holds = {on_b, also_on_b};
  EXPECT_EQ(AbortAs({on_b, also_on_b}), (std::vector<Outcome>{kAborted, kAborted}));
  ASSERT_EQ(b.calls.size(), 1u);  // One call for both.
  EXPECT_EQ(b.calls[0].request_ids_size(), 2);
  EXPECT_EQ(b.calls[0].caller(), "alice");
  EXPECT_TRUE(c.calls.empty());
  EXPECT_TRUE(local_calls_.empty());
}

// An admin's abort stays an admin's on the peer it is forwarded to.
TEST_F(AbortRouterTest, AnAdminsAbortIsForwardedAsAnAdmins) {
  FakePeers::Fake& b = peers_.Add("10.0.0.2:50052", "00000000000b");
  const std::string on_b = GeneratedRequestId("00000000000b");
  b.holds = {on_b};
  local_holds_ = {"here"};
  EXPECT_EQ(AbortAs({on_b, "here"}, absl::InfiniteFuture(), nullptr,
                    Caller::Of("ops", true, true)),
            (std::vector<Outcome>{kAborted, kAborted}));
  ASSERT_EQ(b.calls.size(), 1u);
  EXPECT_EQ(b.calls[0].caller(), "ops");
  EXPECT_TRUE(b.calls[0].caller_aborts_any());
  // A user's is forwarded as a user's.
  AbortAs({GeneratedRequestId("00000000000b")});
  ASSERT_EQ(b.calls.size(), 2u);
  EXPECT_FALSE(b.calls[1].caller_aborts_any());
}

TEST_F(AbortRouterTest, HeldOrGeneratedHereStaysHere) {
  FakePeers::Fake& b = peers_.Add("10.0.0.2:50052", "00000000000b");
  const std::string mine = GeneratedRequestId(kSelf);
  local_holds_ = {"chosen"};
  // "chosen" is held here; `mine` ended already: NOT_FOUND without asking anyone.
  EXPECT_EQ(AbortAs({"chosen", mine}), (std::vector<Outcome>{kAborted, kNotFound}));
  EXPECT_TRUE(b.calls.empty());
  ASSERT_EQ(local_calls_.size(), 1u);
}

TEST_F(AbortRouterTest, AClientChosenIdAsksEveryPeerOnceWithTheOthers) {
  FakePeers::Fake& b = peers_.Add("10.0.0.2:50052", "00000000000b");
  FakePeers::Fake& c = peers_.Add("10.0.0.3:50052", "00000000000c");
  const std::string on_b = GeneratedRequestId("00000000000b");
  b.holds = {on_b};
  c.holds = {"chosen-1"};
  EXPECT_EQ(AbortAs({"chosen-1", on_b, "chosen-2", "chosen-1"}),
            (std::vector<Outcome>{kAborted, kAborted, kNotFound, kAborted}));
  // At most one call per peer: b gets its own id and the chosen ones together.
  ASSERT_EQ(b.calls.size(), 1u);
  EXPECT_EQ(b.calls[0].request_ids_size(), 3);
  ASSERT_EQ(c.calls.size(), 1u);
  EXPECT_EQ(c.calls[0].request_ids_size(), 2);
}

TEST_F(AbortRouterTest, AnUnknownNodeAsksEveryPeer) {
  FakePeers::Fake& b = peers_.Add("10.0.0.2:50052", "");  // Not probed yet.
  const std::string restarted = GeneratedRequestId("0000000000ff");
  b.holds = {restarted};
  EXPECT_EQ(AbortAs({restarted}), (std::vector<Outcome>{kAborted}));
  EXPECT_EQ(b.calls.size(), 1u);
}

TEST_F(AbortRouterTest, APeerThatDoesNotAnswerFailsWhatItMayHoldNeverNotFound) {
  FakePeers::Fake& b = peers_.Add("10.0.0.2:50052", "00000000000b");
  FakePeers::Fake& c = peers_.Add("10.0.0.3:50052", "00000000000c");
  b.down = absl::UnavailableError("connection refused");
  const std::string on_b = GeneratedRequestId("00000000000b");
  const std::string on_c = GeneratedRequestId("00000000000c");
  c.holds = {on_c, "chosen-on-c"};
  std::vector<v1::AbortResult> results;
  EXPECT_EQ(AbortAs({on_b, on_c, "chosen-on-c", "chosen-nowhere"}, absl::InfiniteFuture(),
                    &results),
            (std::vector<Outcome>{kFailed, kAborted, kAborted, kFailed}));
  EXPECT_EQ(results[0].error().code(), 14);
  EXPECT_NE(results[0].error().message().find("10.0.0.2:50052"), std::string::npos)
      << results[0].error().message();
  EXPECT_NE(results[3].error().message().find("retry"), std::string::npos);
}

TEST_F(AbortRouterTest, PeerCallsEndAtTheClientDeadlineOrTheTimeout) {
  FakePeers::Fake& b = peers_.Add("10.0.0.2:50052", "00000000000b");
  AbortAs({"x"}, loop_.Now() + absl::Seconds(1));
  AbortAs({"y"});
  ASSERT_EQ(b.deadlines.size(), 2u);
  EXPECT_EQ(b.deadlines[0], loop_.Now() + absl::Seconds(1));
  EXPECT_EQ(b.deadlines[1], loop_.Now() + absl::Seconds(5));
}

TEST_F(AbortRouterTest, TooManyIdsAreTheLocalAbortsToRefuse) {
  peers_.Add("10.0.0.2:50052", "00000000000b");
  v1::AbortRequest request;
  for (int i = 0; i <= kMaxAbortIdsPerCall; ++i) request.add_request_ids("id");
  router_.Abort(request, absl::InfiniteFuture(), [](absl::StatusOr<v1::AbortResponse>) {},
                Caller::Of("alice", false, false));
  loop_.RunPending();
  ASSERT_EQ(local_calls_.size(), 1u);
  EXPECT_TRUE(peers_.at("10.0.0.2:50052").calls.empty());
}

}  // namespace
}  // namespace omnistage
