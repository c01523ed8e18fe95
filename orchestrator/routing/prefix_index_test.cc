// PrefixIndex on its own: what an approximate replica holds after routing
// (matches, the cap letting the deepest blocks go first, aging), and a precise
// replica following its worker's reports (snapshot, stores, evictions).
#include "orchestrator/routing/prefix_index.h"

#include <cstdint>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "common/prefix_blocks.h"
#include "gtest/gtest.h"

namespace omnistage {
namespace {

const absl::Time kStart = absl::FromUnixSeconds(1000000);

// The blocks of "<shared><own>" at 4 tokens (16 bytes of text) a block.
std::vector<uint64_t> Blocks(const std::string& text) { return TextBlockHashes(text, 4); }
std::string Text(int blocks, char fill) { return std::string(16 * blocks, fill); }

PrefixPickOptions Options() {
  PrefixPickOptions options;
  options.block_tokens = 4;
  options.index_blocks_per_replica = 10;
  options.index_ttl = absl::Minutes(1);
  return options;
}

TEST(PrefixIndexTest, AReplicaMatchesThePrefixRoutedToIt) {
  PrefixIndex index(Options());
  const std::string system = Text(3, 's');
  index.Routed(1, Blocks(system + Text(2, 'a')), kStart);
  EXPECT_EQ(index.Matched(1, Blocks(system + Text(2, 'a') + Text(1, 'x')), kStart), 5);
  EXPECT_EQ(index.Matched(1, Blocks(system + Text(4, 'b')), kStart), 3);  // the system prompt
  EXPECT_EQ(index.Matched(0, Blocks(system), kStart), 0);                 // another replica
  EXPECT_EQ(index.Matched(7, Blocks(system), kStart), 0);                 // never seen
  EXPECT_EQ(index.Matched(1, {}, kStart), 0);
  EXPECT_EQ(index.blocks(1), 5);
  EXPECT_FALSE(index.precise(1));
  EXPECT_EQ(index.block_tokens(1), 4);
}

TEST(PrefixIndexTest, TheCapLetsTheDeepestBlocksGoFirst) {
  PrefixIndex index(Options());  // 10 blocks a replica
  const std::string a = Text(8, 'a');
  index.Routed(0, Blocks(a), kStart);
  // A second input of 4 blocks: 12 > 10, so the least recently routed go
  // until 9 are left: the three deepest of the first.
  index.Routed(0, Blocks(Text(4, 'b')), kStart + absl::Seconds(1));
  EXPECT_EQ(index.blocks(0), 9);
  EXPECT_EQ(index.Matched(0, Blocks(a), kStart + absl::Seconds(1)), 5);
  EXPECT_EQ(index.Matched(0, Blocks(Text(4, 'b')), kStart + absl::Seconds(1)), 4);
}

TEST(PrefixIndexTest, BlocksRoutedLongerAgoThanTheTtlAreGone) {
  PrefixIndex index(Options());  // ttl 1 min
  index.Routed(0, Blocks(Text(3, 'a')), kStart);
  EXPECT_EQ(index.Matched(0, Blocks(Text(3, 'a')), kStart + absl::Seconds(59)), 3);
  EXPECT_EQ(index.Matched(0, Blocks(Text(3, 'a')), kStart + absl::Seconds(61)), 0);
  // Routing again refreshes.
  index.Routed(0, Blocks(Text(3, 'a')), kStart + absl::Seconds(61));
  EXPECT_EQ(index.Matched(0, Blocks(Text(3, 'a')), kStart + absl::Seconds(62)), 3);
  // Expired blocks are let go when the cap is passed, before any recent one.
  index.Routed(0, Blocks(Text(2, 'b')), kStart + absl::Seconds(200));
  index.Routed(0, Blocks(Text(9, 'c')), kStart + absl::Seconds(201));
  EXPECT_EQ(index.blocks(0), 9);  // the 3 of 'a' expired, then the 2 of 'b' (least recent)
  EXPECT_EQ(index.Matched(0, Blocks(Text(9, 'c')), kStart + absl::Seconds(201)), 9);
}

TEST(PrefixIndexTest, APreciseReplicaFollowsItsReports) {
  PrefixIndex index(Options());
  const std::vector<uint64_t> a = TextBlockHashes(Text(6, 'a'), 8);  // its own block size
  index.Routed(2, Blocks(Text(3, 'z')), kStart);  // forgotten once it reports
  index.SetPrecise(2, 8, 100);
  EXPECT_TRUE(index.precise(2));
  EXPECT_EQ(index.block_tokens(2), 8);
  EXPECT_EQ(index.blocks(2), 0);
  v1::CacheEvents snapshot;
  snapshot.set_snapshot(true);
  for (int i = 0; i < 2; ++i) snapshot.add_stored(a[i]);
  index.Apply(2, snapshot);
  EXPECT_EQ(index.Matched(2, a, kStart), 2);
  v1::CacheEvents more;
  more.add_stored(a[2]);
  index.Apply(2, more);
  EXPECT_EQ(index.Matched(2, a, kStart), 3);
  // The worker evicted its deepest block.
  v1::CacheEvents evicted;
  evicted.add_evicted(a[2]);
  index.Apply(2, evicted);
  EXPECT_EQ(index.Matched(2, a, kStart), 2);
  // Routing does not change what a precise replica holds; time does not age it.
  index.Routed(2, a, kStart);
  EXPECT_EQ(index.Matched(2, a, kStart + absl::Hours(5)), 2);
  // A new snapshot replaces everything.
  v1::CacheEvents empty;
  empty.set_snapshot(true);
  index.Apply(2, empty);
  EXPECT_EQ(index.blocks(2), 0);
}

TEST(PrefixIndexTest, AReplicaReportsNoMoreThanTwiceItsCapacity) {
  PrefixIndex index(Options());
  index.SetPrecise(0, 4, 3);
  v1::CacheEvents events;
  for (uint64_t b = 1; b <= 10; ++b) events.add_stored(b);
  index.Apply(0, events);
  EXPECT_EQ(index.blocks(0), 6);
}

TEST(PrefixIndexTest, ForgetEmptiesAReplicaAndMakesItApproximateAgain) {
  PrefixIndex index(Options());
  index.SetPrecise(0, 8, 10);
  index.Routed(1, Blocks(Text(2, 'a')), kStart);
  index.Forget(0);
  index.Forget(1);
  index.Forget(9);  // unknown: nothing
  EXPECT_FALSE(index.precise(0));
  EXPECT_EQ(index.block_tokens(0), 4);
  EXPECT_EQ(index.Matched(1, Blocks(Text(2, 'a')), kStart), 0);
  // A report for an approximate replica is ignored.
  v1::CacheEvents events;
  events.add_stored(Blocks(Text(1, 'a'))[0]);
  index.Apply(1, events);
  EXPECT_EQ(index.blocks(1), 0);
}

}  // namespace
}  // namespace omnistage
