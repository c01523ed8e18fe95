#include "common/prefix_blocks.h"

#include <cstdint>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace omnistage {
namespace {

std::string Prompt(int bytes) {
  std::string text;
  for (int i = 0; text.size() < static_cast<size_t>(bytes); ++i) {
    text += "word" + std::to_string(i) + " ";
  }
  text.resize(bytes);
  return text;
}

TEST(PrefixBlocksTest, OnlyWholeBlocksAreNamed) {
  // 16 tokens of 4 bytes: 64 bytes a block.
  EXPECT_TRUE(TextBlockHashes(Prompt(63), 16).empty());
  EXPECT_EQ(TextBlockHashes(Prompt(64), 16).size(), 1u);
  EXPECT_EQ(TextBlockHashes(Prompt(200), 16).size(), 3u);
  EXPECT_EQ(TokenBlockHashes(std::vector<int32_t>(47, 7), 16).size(), 2u);
}

TEST(PrefixBlocksTest, AHashStandsForItsWholePrefix) {
  const std::string shared = Prompt(640);
  const std::vector<uint64_t> a = TextBlockHashes(shared + "one question", 16);
  const std::vector<uint64_t> b = TextBlockHashes(shared + "another question", 16);
  ASSERT_EQ(a.size(), 10u);
  EXPECT_EQ(a, std::vector<uint64_t>(b.begin(), b.begin() + 10));
  // The same block after a different prefix has another name.
  std::string changed = shared;
  changed[0] = 'W';
  const std::vector<uint64_t> c = TextBlockHashes(changed, 16);
  for (size_t i = 0; i < c.size(); ++i) EXPECT_NE(c[i], a[i]) << i;
}

TEST(PrefixBlocksTest, ChunkingDoesNotChangeTheNames) {
  const std::string text = Prompt(1000);
  const std::vector<uint64_t> whole = TextBlockHashes(text, 16);
  for (size_t step : {1, 3, 63, 64, 65, 500}) {
    BlockHasher hasher(BlockHasher::Kind::kText, 16);
    for (size_t at = 0; at < text.size(); at += step) hasher.Append(text.substr(at, step));
    EXPECT_EQ(hasher.hashes(), whole) << "chunks of " << step;
    EXPECT_EQ(hasher.tokens(), 250);
  }
}

TEST(PrefixBlocksTest, TextAndTokensAreNamedApart) {
  // The same bytes as text and as token ids start from different seeds.
  const std::vector<int32_t> tokens(16, 0x61616161);  // "aaaa" little-endian
  EXPECT_NE(TokenBlockHashes(tokens, 16), TextBlockHashes(std::string(64, 'a'), 16));
}

TEST(PrefixBlocksTest, MaxBlocksStopsNaming) {
  BlockHasher hasher(BlockHasher::Kind::kText, 1);
  hasher.set_max_blocks(3);
  hasher.Append(Prompt(40));
  EXPECT_EQ(hasher.hashes().size(), 3u);
  EXPECT_EQ(hasher.tokens(), 10);
  EXPECT_EQ(hasher.hashes(), std::vector<uint64_t>(TextBlockHashes(Prompt(12), 1)));
}

// Pinned names: the Python engines compute the same ones
// (stage_worker/engines/python/testdata/prefix_cache_test.py checks these values).
TEST(PrefixBlocksTest, NamesArePinned) {
  EXPECT_EQ(ChainBlockHash(1, "a"), 8035723705688925496ULL);
  EXPECT_EQ(TextBlockHashes("The quick brown fox jumps over the lazy dog, twice.", 4),
            (std::vector<uint64_t>{15896087689116713669ULL, 2922689326145311753ULL, 11623984927517038119ULL}));
  EXPECT_EQ(TokenBlockHashes({1, 2, 3, -1, 70000, 6}, 3), (std::vector<uint64_t>{15959705789133385612ULL, 11035512868910068976ULL}));
}

}  // namespace
}  // namespace omnistage
