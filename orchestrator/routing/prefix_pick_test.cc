// The prefix-aware pick's cost: prefill not saved plus load, least loaded out
// of balance, ties to the first in order; and a request's input as blocks.
#include "orchestrator/routing/prefix_pick.h"

#include <map>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "common/prefix_blocks.h"
#include "gtest/gtest.h"

namespace omnistage {
namespace {

const absl::Time kNow = absl::FromUnixSeconds(1000000);

google::protobuf::RepeatedPtrField<v1::Payload> TextInput(const std::string& text) {
  google::protobuf::RepeatedPtrField<v1::Payload> input;
  input.Add()->mutable_text()->set_text(text);
  return input;
}

class PrefixPickTest : public testing::Test {
 protected:
  PrefixPickTest() {
    options_.block_tokens = 4;  // 16 bytes of text
    options_.load_cost_tokens = 100;
    options_.balance_threshold = 0.5;
  }
  PrefixChoice Choose(const std::string& prompt, std::vector<int> order = {0, 1, 2}) {
    google::protobuf::RepeatedPtrField<v1::Payload> input = TextInput(prompt);
    InputBlocks blocks(input);
    return ChooseByPrefix(index_, order, [this](int r) { return load_[r]; }, blocks, kNow);
  }

  PrefixPickOptions options_;
  PrefixIndex index_{PrefixPickOptions{}};
  std::map<int, double> load_ = {{0, 0}, {1, 0}, {2, 0}};
};

TEST_F(PrefixPickTest, TheReplicaHoldingThePrefixWins) {
  index_ = PrefixIndex(options_);
  const std::string history(16 * 50, 'h');  // 50 blocks, 200 tokens
  index_.Routed(2, TextBlockHashes(history, 4), kNow);
  const PrefixChoice choice = Choose(history + "and a new question");
  EXPECT_EQ(choice.replica, 2);
  EXPECT_EQ(choice.why, PrefixChoice::Why::kPrefix);
  EXPECT_EQ(choice.matched_tokens, 200);
  EXPECT_EQ(choice.input_tokens, (16 * 50 + 18) / 4);
}

TEST_F(PrefixPickTest, LoadWeighsAgainstTheSavedPrefill) {
  index_ = PrefixIndex(options_);
  const std::string history(16 * 10, 'h');  // 40 tokens cached on replica 0
  index_.Routed(0, TextBlockHashes(history, 4), kNow);
  // Replica 0 at 0.45 per slot costs 45 tokens of load against 40 saved:
  // replica 1 (idle, nothing cached) is cheaper. Within the balance threshold.
  load_ = {{0, 0.45}, {1, 0.0}, {2, 0.2}};
  PrefixChoice choice = Choose(history + "next");
  EXPECT_EQ(choice.replica, 1);
  EXPECT_EQ(choice.why, PrefixChoice::Why::kPrefix);  // something was cached somewhere
  EXPECT_EQ(choice.matched_tokens, 0);
  // At 0.3 it costs 30 < 40: it wins.
  load_ = {{0, 0.3}, {1, 0.0}, {2, 0.2}};
  EXPECT_EQ(Choose(history + "next").replica, 0);
}

TEST_F(PrefixPickTest, OutOfBalanceTheLeastLoadedWins) {
  index_ = PrefixIndex(options_);
  const std::string history(16 * 500, 'h');  // 2000 tokens cached on replica 0
  index_.Routed(0, TextBlockHashes(history, 4), kNow);
  load_ = {{0, 0.9}, {1, 0.3}, {2, 0.5}};  // spread 0.6 > 0.5
  const PrefixChoice choice = Choose(history + "next");
  EXPECT_EQ(choice.replica, 1);
  EXPECT_EQ(choice.why, PrefixChoice::Why::kLeastLoaded);
}

TEST_F(PrefixPickTest, NothingCachedTiesGoToTheFirstInOrder) {
  index_ = PrefixIndex(options_);
  PrefixChoice choice = Choose(std::string(100, 'q'), {2, 0, 1});
  EXPECT_EQ(choice.replica, 2);
  EXPECT_EQ(choice.why, PrefixChoice::Why::kNoMatch);
  // Without a tie the lowest load wins.
  load_ = {{0, 0.1}, {1, 0.0}, {2, 0.2}};
  EXPECT_EQ(Choose(std::string(100, 'q'), {2, 0, 1}).replica, 1);
}

TEST_F(PrefixPickTest, EachReplicaIsMatchedWithItsOwnBlockSize) {
  index_ = PrefixIndex(options_);
  const std::string history(16 * 8, 'h');
  index_.SetPrecise(1, 8, 100);  // 32-byte blocks
  v1::CacheEvents events;
  for (uint64_t block : TextBlockHashes(history, 8)) events.add_stored(block);
  index_.Apply(1, events);
  const PrefixChoice choice = Choose(history + "next");
  EXPECT_EQ(choice.replica, 1);
  EXPECT_EQ(choice.matched_tokens, 32);
}

TEST(InputBlocksTest, TextWinsOverTokensAndChunksJoin) {
  google::protobuf::RepeatedPtrField<v1::Payload> input;
  input.Add()->mutable_tokens()->add_ids(7);
  input.Add()->mutable_text()->set_text(std::string(10, 'a'));
  input.Add()->mutable_text()->set_text(std::string(22, 'a'));
  InputBlocks blocks(input);
  EXPECT_EQ(blocks.For(4), TextBlockHashes(std::string(32, 'a'), 4));
  EXPECT_EQ(blocks.tokens(), 8);
  google::protobuf::RepeatedPtrField<v1::Payload> tokens;
  for (int i = 0; i < 9; ++i) tokens.Add()->mutable_tokens()->add_ids(i);
  InputBlocks token_blocks(tokens);
  EXPECT_EQ(token_blocks.For(4), TokenBlockHashes({0, 1, 2, 3, 4, 5, 6, 7, 8}, 4));
  EXPECT_EQ(token_blocks.tokens(), 9);
}

}  // namespace
}  // namespace omnistage
