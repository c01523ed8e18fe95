// RequestPrefill: a request's input goes through the cache block by block as
// it arrives; what it finds cached does not depend on how it was chunked; its
// tail is prefilled once the input is complete.
#include "stage_worker/engines/base/request_prefill.h"

#include <string>
#include <vector>

#include "common/prefix_blocks.h"
#include "gtest/gtest.h"

namespace omnistage {
namespace {

constexpr int kBlockTokens = 2;  // 8 bytes of text

v1::Payload Text(std::string text) {
  v1::Payload payload;
  payload.mutable_text()->set_text(std::move(text));
  return payload;
}

// 44 bytes: 5 whole blocks of text and 1 token more.
const std::string kPrompt = "The quick brown fox jumps over the lazy dog.";

// The tokens `text` costs to prefill, given whole to a request, on `cache`.
int64_t PrefillWhole(PrefixCache* cache, const std::string& text) {
  RequestPrefill prefill(kBlockTokens, cache != nullptr);
  prefill.Append(Text(text));
  return prefill.Run(cache, /*complete=*/true);
}

TEST(RequestPrefillTest, WholeBlocksGoThroughTheCache) {
  PrefixCache cache(/*capacity_blocks=*/64, kBlockTokens);
  ASSERT_EQ(kPrompt.size(), 44u);
  EXPECT_EQ(PrefillWhole(&cache, kPrompt), 11);  // 44 bytes: 11 tokens
  EXPECT_EQ(cache.stats().blocks, 5);
  for (uint64_t block : TextBlockHashes(kPrompt, kBlockTokens)) EXPECT_TRUE(cache.Holds(block));
  // Again: the 5 blocks are cached, the last token is prefilled.
  EXPECT_EQ(PrefillWhole(&cache, kPrompt), 1);
  EXPECT_EQ(cache.stats().hit_tokens, 10);
  EXPECT_EQ(cache.stats().miss_tokens, 12);
}

// Run after every chunk of 3 bytes, the request finds what it finds whole.
TEST(RequestPrefillTest, ChunkingDoesNotChangeWhatHits) {
  PrefixCache cache(64, kBlockTokens);
  PrefillWhole(&cache, kPrompt.substr(0, 24));  // 3 blocks
  RequestPrefill prefill(kBlockTokens, /*name_blocks=*/true);
  int64_t prefilled = 0;
  for (size_t at = 0; at < kPrompt.size(); at += 3) {
    prefill.Append(Text(kPrompt.substr(at, 3)));
    prefilled += prefill.Run(&cache, /*complete=*/false);
  }
  EXPECT_EQ(prefilled, 4);  // blocks 4 and 5; the tail waits
  prefilled += prefill.Run(&cache, /*complete=*/true);
  EXPECT_EQ(prefilled, 5);
  EXPECT_EQ(cache.stats().hit_tokens, 6);
}

// A block that missed makes every later block of its input miss, even one
// that arrives in a later step and is held.
TEST(RequestPrefillTest, AMissInAnEarlierStepKeepsMissing) {
  PrefixCache cache(/*capacity_blocks=*/6, kBlockTokens);
  PrefillWhole(&cache, kPrompt);
  // Only the prompt's first block leaves: blocks 2..5 stay held.
  const std::vector<uint64_t> blocks = TextBlockHashes(kPrompt, kBlockTokens);
  bool hitting = true;
  cache.Run(std::vector<uint64_t>{42}, &hitting);
  cache.Run(absl::MakeConstSpan(blocks).subspan(1), &hitting);
  cache.Run(std::vector<uint64_t>{43}, &hitting);
  ASSERT_FALSE(cache.Holds(blocks[0]));
  ASSERT_TRUE(cache.Holds(blocks[1]));
  const int64_t hits_before = cache.stats().hit_tokens;

  RequestPrefill prefill(kBlockTokens, true);
  prefill.Append(Text(kPrompt.substr(0, 8)));
  EXPECT_EQ(prefill.Run(&cache, false), 2);
  for (size_t i = 1; i < blocks.size(); ++i) EXPECT_TRUE(cache.Holds(blocks[i])) << i;
  prefill.Append(Text(kPrompt.substr(8)));
  EXPECT_EQ(prefill.Run(&cache, true), 9);
  EXPECT_EQ(cache.stats().hit_tokens, hits_before);
}

TEST(RequestPrefillTest, TokenIdsAreTheirOwnInput) {
  PrefixCache cache(64, kBlockTokens);
  RequestPrefill first(kBlockTokens, true);
  v1::Payload tokens;
  for (int32_t id : {1, 2, 3, 4, 5}) tokens.mutable_tokens()->add_ids(id);
  first.Append(tokens);
  first.Append(Text(kPrompt));
  EXPECT_EQ(first.Run(&cache, true), 16);  // 5 ids and 11 tokens of text
  RequestPrefill second(kBlockTokens, true);
  second.Append(tokens);
  EXPECT_EQ(second.Run(&cache, true), 1);  // ids 1..4 cached, 5 is the tail
  for (uint64_t block : TokenBlockHashes({1, 2, 3, 4}, kBlockTokens)) {
    EXPECT_TRUE(cache.Holds(block));
  }
}

// Without a cache every token is prefilled, by the same rule.
TEST(RequestPrefillTest, WithoutACacheEveryTokenIsPrefilled) {
  RequestPrefill prefill(kBlockTokens, /*name_blocks=*/false);
  prefill.Append(Text(kPrompt.substr(0, 20)));
  EXPECT_EQ(prefill.Run(nullptr, false), 4);  // 2 whole blocks; 1 token waits
  prefill.Append(Text(kPrompt.substr(20)));
  EXPECT_EQ(prefill.Run(nullptr, false), 6);
  EXPECT_EQ(prefill.Run(nullptr, true), 1);
  EXPECT_EQ(prefill.Run(nullptr, true), 0);
  EXPECT_EQ(PrefillWhole(nullptr, kPrompt), 11);
}

}  // namespace
}  // namespace omnistage
