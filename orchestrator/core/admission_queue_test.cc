#include "orchestrator/core/admission_queue.h"

#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace omnistage {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAre;

constexpr size_t kRoomy = 1000;

std::vector<std::string> Drain(AdmissionQueue& queue) {
  std::vector<std::string> order;
  while (std::optional<std::string> next = queue.Pop()) order.push_back(*next);
  return order;
}

TEST(AdmissionQueueTest, OneIdentityLeavesInArrivalOrder) {
  AdmissionQueue queue;
  for (const char* id : {"a1", "a2", "a3"}) {
    ASSERT_TRUE(queue.Add({id, "alice", 0, 1}, kRoomy).queued);
  }
  EXPECT_EQ(queue.size(), 3u);
  EXPECT_THAT(Drain(queue), ElementsAre("a1", "a2", "a3"));
  EXPECT_TRUE(queue.empty());
  EXPECT_EQ(queue.Pop(), std::nullopt);
}

// Within an identity, the earliest deadline leaves first; requests without
// one after, in arrival order; a shed still takes the newest arrival.
TEST(AdmissionQueueTest, WithinAnIdentityTheEarliestDeadlineFirst) {
  const absl::Time t = absl::FromUnixSeconds(1000);
  AdmissionQueue queue;
  queue.Add({"none1", "alice", 0, 1}, kRoomy);
  queue.Add({"late", "alice", 0, 1, t + absl::Seconds(5)}, kRoomy);
  queue.Add({"none2", "alice", 0, 1}, kRoomy);
  queue.Add({"soon", "alice", 0, 1, t + absl::Seconds(1)}, kRoomy);
  queue.Add({"also-soon", "alice", 0, 1, t + absl::Seconds(1)}, kRoomy);
  EXPECT_TRUE(queue.Remove("late"));
  queue.Add({"later", "alice", 0, 1, t + absl::Seconds(9)}, kRoomy);
  EXPECT_THAT(Drain(queue), ElementsAre("soon", "also-soon", "later", "none1", "none2"));
}

// Critical requests leave before the identity's others, by deadline among
// themselves; removing one takes it out of its place.
TEST(AdmissionQueueTest, CriticalRequestsLeaveFirstWithinAnIdentity) {
  const absl::Time t = absl::FromUnixSeconds(1000);
  AdmissionQueue queue;
  queue.Add({"soon", "alice", 0, 1, t + absl::Seconds(1)}, kRoomy);
  queue.Add({"critical-late", "alice", 0, 1, t + absl::Seconds(5), true}, kRoomy);
  queue.Add({"critical-none", "alice", 0, 1, absl::InfiniteFuture(), true}, kRoomy);
  queue.Add({"critical-soon", "alice", 0, 1, t + absl::Seconds(2), true}, kRoomy);
  queue.Add({"gone", "alice", 0, 1, t + absl::Seconds(3), true}, kRoomy);
  EXPECT_TRUE(queue.Remove("gone"));
  EXPECT_THAT(Drain(queue), ElementsAre("critical-soon", "critical-late", "critical-none", "soon"));
}

// Deadlines order one identity's requests, not the round between
// identities: a flood with tight deadlines still waits its turn.
TEST(AdmissionQueueTest, DeadlinesKeepTheFairShare) {
  const absl::Time t = absl::FromUnixSeconds(1000);
  AdmissionQueue queue;
  for (int i = 0; i < 4; ++i) {
    queue.Add({absl::StrCat("urgent", i), "flood", 0, 1, t + absl::Milliseconds(i)}, kRoomy);
  }
  queue.Add({"relaxed", "quiet", 0, 1}, kRoomy);
  std::vector<std::string> first = {*queue.Pop(), *queue.Pop()};
  EXPECT_THAT(first, UnorderedElementsAre("urgent0", "relaxed"));
}

TEST(AdmissionQueueTest, HigherPriorityAlwaysFirst) {
  AdmissionQueue queue;
  queue.Add({"low1", "alice", 0, 1}, kRoomy);
  queue.Add({"high1", "bob", 5, 1}, kRoomy);
  queue.Add({"low2", "bob", 0, 1}, kRoomy);
  queue.Add({"mid", "carol", 2, 1}, kRoomy);
  queue.Add({"high2", "alice", 5, 1}, kRoomy);
  EXPECT_EQ(queue.CountAt(0), 2u);
  EXPECT_EQ(queue.CountAt(5), 2u);
  std::vector<std::string> levels;
  for (const QueueLevel& level : queue.Levels()) {
    levels.push_back(absl::StrCat(level.priority, ":", level.identity, "=", level.waiting));
  }
  EXPECT_THAT(levels, ElementsAre("5:bob=1", "5:alice=1", "2:carol=1", "0:alice=1", "0:bob=1"));
  EXPECT_THAT(Drain(queue), ElementsAre("high1", "high2", "mid", "low1", "low2"));
}

TEST(AdmissionQueueTest, AFloodWaitsItsTurnBehindAQuietIdentity) {
  AdmissionQueue queue;
  for (int i = 0; i < 50; ++i) queue.Add({absl::StrCat("flood", i), "flood", 0, 1}, kRoomy);
  queue.Add({"quiet0", "quiet", 0, 1}, kRoomy);
  // The quiet identity's request leaves within one round, not after 50.
  std::vector<std::string> first = {*queue.Pop(), *queue.Pop(), *queue.Pop()};
  EXPECT_THAT(first, ::testing::Contains("quiet0"));
}

TEST(AdmissionQueueTest, WeightsShareTheSlots) {
  AdmissionQueue queue;
  for (int i = 0; i < 300; ++i) {
    queue.Add({absl::StrCat("a", i), "alice", 0, 3}, kRoomy);
    queue.Add({absl::StrCat("b", i), "bob", 0, 1}, kRoomy);
  }
  // While both wait, alice gets three for each of bob's, within one round.
  std::map<char, int> taken;
  for (int n = 1; n <= 200; ++n) {
    ++taken[(*queue.Pop())[0]];
    EXPECT_LE(std::abs(taken['a'] - 3 * taken['b']), 4) << "after " << n;
  }
  EXPECT_EQ(taken['a'], 150);
  EXPECT_EQ(taken['b'], 50);
}

TEST(AdmissionQueueTest, AnIdentityThatLeavesKeepsNoCredit) {
  AdmissionQueue queue;
  queue.Add({"a0", "alice", 0, 5}, kRoomy);
  for (int i = 1; i <= 20; ++i) queue.Add({absl::StrCat("b", i), "bob", 0, 1}, kRoomy);
  EXPECT_EQ(*queue.Pop(), "a0");  // Alice's turn; she has nothing more and leaves.
  EXPECT_EQ(*queue.Pop(), "b1");
  for (int i = 1; i <= 9; ++i) queue.Add({absl::StrCat("a", i), "alice", 0, 5}, kRoomy);
  // Back with a fresh quantum of 5, not the 4 she left unused on top.
  std::vector<std::string> next;
  for (int i = 0; i < 8; ++i) next.push_back(*queue.Pop());
  EXPECT_THAT(next, ElementsAre("a1", "a2", "a3", "a4", "a5", "b2", "a6", "a7"));
}

TEST(AdmissionQueueTest, RemoveTakesAnyRequestOut) {
  AdmissionQueue queue;
  queue.Add({"a1", "alice", 0, 1}, kRoomy);
  queue.Add({"a2", "alice", 0, 1}, kRoomy);
  queue.Add({"b1", "bob", 3, 1}, kRoomy);
  EXPECT_TRUE(queue.Remove("a1"));
  EXPECT_FALSE(queue.Remove("a1"));
  EXPECT_TRUE(queue.Remove("b1"));
  EXPECT_FALSE(queue.Contains("b1"));
  EXPECT_EQ(queue.CountAt(3), 0u);
  EXPECT_THAT(queue.Ids(), UnorderedElementsAre("a2"));
  EXPECT_THAT(Drain(queue), ElementsAre("a2"));
}

TEST(AdmissionQueueTest, AFullQueueShedsTheNewestLowerPriorityRequest) {
  AdmissionQueue queue;
  ASSERT_TRUE(queue.Add({"low-old", "alice", 0, 1}, 3).queued);
  ASSERT_TRUE(queue.Add({"mid", "bob", 1, 1}, 3).queued);
  ASSERT_TRUE(queue.Add({"low-new", "carol", 0, 1}, 3).queued);
  // Same priority as the lowest: refused, nothing shed.
  QueueAddResult refused = queue.Add({"low-late", "dave", 0, 1}, 3);
  EXPECT_FALSE(refused.queued);
  EXPECT_EQ(refused.shed, std::nullopt);
  // Higher: the newest of the lowest priority makes room.
  QueueAddResult high = queue.Add({"high", "erin", 2, 1}, 3);
  EXPECT_TRUE(high.queued);
  EXPECT_EQ(high.shed, "low-new");
  EXPECT_THAT(Drain(queue), ElementsAre("high", "mid", "low-old"));
}

TEST(AdmissionQueueTest, ManyIdentitiesAndRemovalsStayConsistent) {
  AdmissionQueue queue;
  for (int i = 0; i < 100; ++i) {
    queue.Add({absl::StrCat("r", i), absl::StrCat("id", i % 7), i % 3, 1 + i % 4}, kRoomy);
  }
  for (int i = 0; i < 100; i += 5) EXPECT_TRUE(queue.Remove(absl::StrCat("r", i)));
  std::vector<std::string> order = Drain(queue);
  EXPECT_EQ(order.size(), 80u);
  EXPECT_THAT(queue.Ids(), IsEmpty());
}

}  // namespace
}  // namespace omnistage
