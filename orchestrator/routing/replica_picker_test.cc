// ReplicaPicker on its own: each policy's choice over replicas in known
// states, the rotation, and a session's replica. StagePool's picks (bindings,
// reports, the prefix-aware pick with real input) are in stage_pool_pick_test.cc.
#include "orchestrator/routing/replica_picker.h"

#include <vector>

#include "gtest/gtest.h"

namespace omnistage {
namespace {

const absl::Time kNow = absl::FromUnixSeconds(1700000000);

std::vector<ReplicaState> Replicas(std::vector<int> loads, int capacity = 4) {
  std::vector<ReplicaState> replicas(loads.size());
  for (size_t r = 0; r < loads.size(); ++r) {
    replicas[r].alive = true;
    replicas[r].capacity = capacity;
    replicas[r].load_requests = loads[r];
  }
  return replicas;
}

// Picks for a request with `context` and records it, as StagePool does.
PickDecision PickAndRecord(ReplicaPicker& picker, const std::vector<int>& live,
                           std::vector<ReplicaState>& replicas, const PickContext& context = {}) {
  PickDecision decision = picker.Choose(live, replicas, context);
  picker.Picked(decision.replica, context);
  ++replicas[decision.replica].sent_since_load;
  return decision;
}

TEST(ReplicaPickerTest, RoundRobinRotatesOverTheLiveReplicas) {
  ReplicaPicker picker;
  std::vector<ReplicaState> replicas = Replicas({0, 0, 0});
  std::vector<int> picked;
  for (int i = 0; i < 4; ++i) picked.push_back(PickAndRecord(picker, {0, 2}, replicas).replica);
  EXPECT_EQ(picked, (std::vector<int>{0, 2, 0, 2}));
  EXPECT_STREQ(picker.Choose({0, 2}, replicas, {}).why, "round_robin");
}

TEST(ReplicaPickerTest, LeastLoadedComparesLoadPerSlot) {
  ReplicaPicker picker;
  picker.set_policy(PickPolicy::kLeastLoaded, {});
  std::vector<ReplicaState> replicas = Replicas({3, 1, 1});
  replicas[2].capacity = 8;  // 1 of 8 is less than 1 of 4.
  const PickDecision decision = picker.Choose({0, 1, 2}, replicas, {});
  EXPECT_EQ(decision.replica, 2);
  EXPECT_STREQ(decision.why, "least_loaded");
}

TEST(ReplicaPickerTest, LeastLoadedCountsWhatWasSentSinceTheReport) {
  ReplicaPicker picker;
  picker.set_policy(PickPolicy::kLeastLoaded, {});
  std::vector<ReplicaState> replicas = Replicas({0, 0});
  std::vector<int> picked;
  for (int i = 0; i < 4; ++i) picked.push_back(PickAndRecord(picker, {0, 1}, replicas).replica);
  // Equal replicas share the requests.
  EXPECT_EQ(replicas[0].load(), 2);
  EXPECT_EQ(replicas[1].load(), 2);
}

TEST(ReplicaPickerTest, ASessionStaysOnItsReplicaWhileItHasASlot) {
  ReplicaPicker picker;
  picker.set_policy(PickPolicy::kLeastLoaded, {});
  std::vector<ReplicaState> replicas = Replicas({0, 0}, /*capacity=*/2);
  const PickContext session{"chat-1", nullptr, kNow};
  const int first = PickAndRecord(picker, {0, 1}, replicas, session).replica;
  const PickDecision again = PickAndRecord(picker, {0, 1}, replicas, session);
  EXPECT_EQ(again.replica, first);
  EXPECT_STREQ(again.why, "session");
  // Full (2 of 2): the policy decides, and the session follows.
  const PickDecision moved = PickAndRecord(picker, {0, 1}, replicas, session);
  EXPECT_NE(moved.replica, first);
  EXPECT_STREQ(moved.why, "least_loaded");
  EXPECT_EQ(PickAndRecord(picker, {0, 1}, replicas, session).replica, moved.replica);
}

TEST(ReplicaPickerTest, ASessionsReplicaThatIsNotLiveIsNotPicked) {
  ReplicaPicker picker;
  std::vector<ReplicaState> replicas = Replicas({0, 0});
  const PickContext session{"chat-1", nullptr, kNow};
  const int first = PickAndRecord(picker, {0, 1}, replicas, session).replica;
  replicas[first].draining = true;
  const std::vector<int> live = {1 - first};
  const PickDecision decision = picker.Choose(live, replicas, session);
  EXPECT_EQ(decision.replica, 1 - first);
  EXPECT_STREQ(decision.why, "round_robin");
}

TEST(ReplicaPickerTest, APolicyChangeStartsAFreshPrefixIndex) {
  ReplicaPicker picker;
  PrefixPickOptions prefix;
  picker.set_policy(PickPolicy::kPrefixAware, prefix);
  EXPECT_EQ(picker.policy(), PickPolicy::kPrefixAware);
  std::vector<ReplicaState> replicas = Replicas({0, 0});
  const PickDecision decision = picker.Choose({0, 1}, replicas, {});
  // No input: nothing matches anywhere.
  EXPECT_STREQ(decision.why, "no_match");
  EXPECT_EQ(decision.matched_tokens, 0);
}

}  // namespace
}  // namespace omnistage
