// BatchingEngine's prefix cache and modelled prefill (docs/engines.md, "Prefix
// cache"): its parameters, what a request finds cached (whole, streamed, a
// shared prefix), the changes it reports, and a step's time with and without
// its prefix cached.
#include <chrono>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "common/prefix_blocks.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "stage_worker/engines/base/batching_engine.h"
#include "stage_worker/engines/base/engine_params.h"
#include "stage_worker/engines/testing/engine_harness.h"

namespace omnistage {
namespace {

using engine_testing::EchoEngine;
using engine_testing::MakeRequest;
using engine_testing::MustStep;
using engine_testing::RunToCompletion;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAreArray;

// 2 tokens a block: 8 bytes of text.
BatchingOptions Cached(int capacity_blocks = 64) {
  BatchingOptions options;
  options.prefix_cache_blocks = capacity_blocks;
  options.block_tokens = 2;
  return options;
}

// 40 bytes: 10 tokens, 5 whole blocks of 2.
constexpr char kPrompt[] = "You are a helpful assistant. Be brief!!!";

// Runs request `id` with `text` whole to its end.
void RunWhole(Engine* engine, const std::string& id, const std::string& text) {
  ASSERT_TRUE(engine->Add(MakeRequest(id, {TextPayload(text)})).ok());
  RunToCompletion(engine);
}

TEST(BatchingPrefixOptionsTest, ReadsItsParameters) {
  EngineParams params(
      "echo",
      {{"prefix_cache_blocks", "4096"}, {"block_tokens", "32"}, {"prefill_us_per_token", "250"}});
  BatchingOptions options = BatchingOptions::Read(&params);
  ASSERT_TRUE(params.Finish().ok()) << params.Finish();
  EXPECT_EQ(options.prefix_cache_blocks, 4096);
  EXPECT_EQ(options.block_tokens, 32);
  EXPECT_EQ(options.prefill_per_token, absl::Microseconds(250));
}

TEST(BatchingPrefixOptionsTest, DefaultsToNoCache) {
  EngineParams params("echo", {});
  BatchingOptions options = BatchingOptions::Read(&params);
  EXPECT_EQ(options.prefix_cache_blocks, 0);
  EXPECT_EQ(options.block_tokens, kDefaultBlockTokens);
  EXPECT_EQ(options.prefill_per_token, absl::ZeroDuration());

  EchoEngine engine(options);
  EXPECT_EQ(engine.prefix_cache().block_tokens, 0);
  EXPECT_EQ(engine.prefix_cache().capacity_blocks, 0);
  RunWhole(&engine, "a", kPrompt);
  EXPECT_TRUE(engine.TakeCacheChanges().empty());
  EXPECT_EQ(engine.prefix_cache_stats().miss_tokens, 0);
  absl::StatusOr<google::protobuf::Value> stats = engine.Utility("stats", {});
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->struct_value().fields().count("prefix_cache_blocks"), 0u);
}

TEST(BatchingPrefixOptionsTest, RefusesValuesOutOfRangeNamingTheKey) {
  const std::map<std::string, std::string> bad[] = {
      {{"prefix_cache_blocks", "-1"}},
      {{"prefix_cache_blocks", "1048577"}},
      {{"block_tokens", "0"}},
      {{"block_tokens", "4097"}},
      {{"prefill_us_per_token", "soon"}},
      {{"prefill_us_per_token", "2s"}},
  };
  for (const auto& values : bad) {
    const std::string key = values.begin()->first;
    SCOPED_TRACE(key + "=" + values.begin()->second);
    EngineParams params("echo", values);
    BatchingOptions::Read(&params);
    absl::Status status = params.Finish();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(status.message()), HasSubstr("engine echo: parameter " + key));
  }
  EngineParams params("echo", {{"block_tokens", "0"}});
  BatchingOptions::Read(&params);
  EXPECT_EQ(params.Finish().message(),
            "engine echo: parameter block_tokens: expected an integer in [1, 4096], got '0'");
}

TEST(BatchingPrefixTest, ARepeatedPromptHits) {
  EchoEngine engine(Cached());
  EXPECT_EQ(engine.prefix_cache().block_tokens, 2);
  EXPECT_EQ(engine.prefix_cache().capacity_blocks, 64);
  RunWhole(&engine, "a", kPrompt);
  PrefixCacheStats stats = engine.prefix_cache_stats();
  EXPECT_EQ(stats.blocks, 5);
  EXPECT_EQ(stats.hit_tokens, 0);
  EXPECT_EQ(stats.miss_tokens, 10);

  RunWhole(&engine, "b", kPrompt);
  stats = engine.prefix_cache_stats();
  EXPECT_EQ(stats.blocks, 5);
  EXPECT_EQ(stats.hit_tokens, 10);
  EXPECT_EQ(stats.miss_tokens, 10);

  absl::StatusOr<google::protobuf::Value> utility = engine.Utility("stats", {});
  ASSERT_TRUE(utility.ok());
  const auto& fields = utility->struct_value().fields();
  EXPECT_EQ(fields.at("prefix_cache_blocks").number_value(), 5);
  EXPECT_EQ(fields.at("prefix_cache_capacity_blocks").number_value(), 64);
  EXPECT_EQ(fields.at("prefix_cache_hit_tokens").number_value(), 10);
  EXPECT_EQ(fields.at("prefix_cache_miss_tokens").number_value(), 10);
}

// Streamed in small chunks with steps in between, the same prompt finds what
// it finds whole.
TEST(BatchingPrefixTest, StreamedInputHitsAsItArrives) {
  EchoEngine engine(Cached());
  RunWhole(&engine, "whole", kPrompt);
  const std::string prompt = kPrompt;
  ASSERT_TRUE(engine.Add(MakeRequest("streamed", {TextPayload(prompt.substr(0, 3))}, false)).ok());
  MustStep(&engine);
  for (size_t at = 3; at < prompt.size(); at += 3) {
    ASSERT_TRUE(engine.AppendInput("streamed", {TextPayload(prompt.substr(at, 3))}, false).ok());
    MustStep(&engine);
  }
  EXPECT_EQ(engine.prefix_cache_stats().hit_tokens, 10);
  ASSERT_TRUE(engine.AppendInput("streamed", {}, /*last=*/true).ok());
  RunToCompletion(&engine);
  EXPECT_EQ(engine.prefix_cache_stats().hit_tokens, 10);
  EXPECT_EQ(engine.prefix_cache_stats().miss_tokens, 10);
}

// A second request with the same system prompt and another question finds the
// prompt's blocks cached, and only them.
TEST(BatchingPrefixTest, ASharedPrefixHits) {
  EchoEngine engine(Cached());
  const std::string system = kPrompt;
  RunWhole(&engine, "a", system + " What is the capital of France?");
  const int64_t hits = engine.prefix_cache_stats().hit_tokens;
  RunWhole(&engine, "b", system + " How far away is the moon, please?");
  EXPECT_EQ(engine.prefix_cache_stats().hit_tokens - hits, 10);
}

TEST(BatchingPrefixTest, ReportsTheBlocksItStoresAndEvicts) {
  EchoEngine engine(Cached(/*capacity_blocks=*/5));
  RunWhole(&engine, "a", kPrompt);
  std::set<uint64_t> stored, evicted;
  for (const CacheChange& change : engine.TakeCacheChanges()) {
    (change.stored ? stored : evicted).insert(change.block);
  }
  const std::vector<uint64_t> first = TextBlockHashes(kPrompt, 2);
  EXPECT_THAT(stored, UnorderedElementsAreArray(first));
  EXPECT_TRUE(evicted.empty());
  EXPECT_TRUE(engine.TakeCacheChanges().empty());

  const std::string other = "Another prompt, with blocks of its own!!";
  RunWhole(&engine, "b", other);
  stored.clear();
  for (const CacheChange& change : engine.TakeCacheChanges()) {
    (change.stored ? stored : evicted).insert(change.block);
  }
  EXPECT_THAT(stored, UnorderedElementsAreArray(TextBlockHashes(other, 2)));
  EXPECT_THAT(evicted, UnorderedElementsAreArray(first));
}

// Real time is the thing under test here; the bounds are generous. 400 bytes
// of text are 100 tokens, 25 whole blocks of 4; at 2000 us a token, their
// prefill is 200 ms.
double StepMillis(Engine* engine) {
  auto start = std::chrono::steady_clock::now();
  MustStep(engine);
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

// Adds request `id` with `prompt`; how long its first step took.
double FirstStepMillis(Engine* engine, const std::string& id, const std::string& prompt) {
  EXPECT_TRUE(engine->Add(MakeRequest(id, {TextPayload(prompt)})).ok());
  return StepMillis(engine);
}

TEST(BatchingPrefixTest, AStepTakesLongerForWhatItMustPrefill) {
  BatchingOptions options = Cached();
  options.block_tokens = 4;
  options.prefill_per_token = absl::Microseconds(2000);
  options.step_time = absl::Milliseconds(1);
  EchoEngine engine(options);
  std::string prompt;
  while (prompt.size() < 400) prompt += "0123456789abcdef";
  prompt.resize(400);

  EXPECT_GE(FirstStepMillis(&engine, "cold", prompt), 200.0);
  EXPECT_EQ(engine.prefix_cache_stats().miss_tokens, 100);
  engine.Abort({"cold"});
  // The same prompt again: cached, so the step takes about step_time.
  EXPECT_LT(FirstStepMillis(&engine, "warm", prompt), 100.0);
  EXPECT_EQ(engine.prefix_cache_stats().hit_tokens, 100);
  engine.Abort({"warm"});
  // Another prompt: its first step prefills it, the next one nothing.
  std::string other = prompt;
  other[0] = '#';
  EXPECT_GE(FirstStepMillis(&engine, "other", other), 200.0);
  EXPECT_LT(StepMillis(&engine), 100.0);
}

// Without a cache, prefill_us_per_token makes every input token cost.
TEST(BatchingPrefixTest, WithoutACacheEveryTokenIsPrefilled) {
  BatchingOptions options;
  options.block_tokens = 4;
  options.prefill_per_token = absl::Microseconds(2000);
  EchoEngine engine(options);
  const std::string prompt(400, 'x');
  EXPECT_GE(FirstStepMillis(&engine, "a", prompt), 200.0);
  EXPECT_GE(FirstStepMillis(&engine, "b", prompt), 200.0);
}

}  // namespace
}  // namespace omnistage
