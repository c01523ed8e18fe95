// How a Python engine declares a prefix cache and reports it
// (python_prefix_cache.h): the reference engine's layout, figures and changes,
// with the block names common/prefix_blocks.h gives; an engine without one;
// refused declarations; and errors from the cache methods, fatal at the next
// step as load()'s are.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/field_error.h"
#include "common/prefix_blocks.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "stage_worker/engines/registry.h"

namespace omnistage {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;

// Bazel runs tests from the workspace root of the runfiles.
constexpr char kPath[] = "stage_worker/engines/python:stage_worker/engines/python/testdata";

absl::StatusOr<std::unique_ptr<Engine>> Python(const std::string& module, const std::string& cls,
                                               std::map<std::string, std::string> params = {}) {
  params["path"] = kPath;
  params["module"] = module;
  params["class"] = cls;
  return CreateEngine("python", params);
}

EngineRequest TextRequest(std::string id, std::string text) {
  EngineRequest request;
  request.id = std::move(id);
  request.input.emplace_back().mutable_text()->set_text(std::move(text));
  request.params.set_max_tokens(1);
  return request;
}

// Validates in the loop, adds and steps once, as the busy loop does.
absl::Status AddAndStep(Engine& engine, EngineRequest request) {
  if (absl::Status s = engine.ValidateInLoop(request); !s.ok()) return s;
  if (absl::Status s = engine.Add(std::move(request)); !s.ok()) return s;
  return engine.Step().status();
}

void ExpectStats(const PrefixCacheStats& stats, int blocks, int64_t hit, int64_t miss) {
  EXPECT_EQ(stats.blocks, blocks);
  EXPECT_EQ(stats.hit_tokens, hit);
  EXPECT_EQ(stats.miss_tokens, miss);
}

TEST(PythonEngineCacheTest, TheReferenceEngineReportsItsCacheWithTheSharedBlockNames) {
  absl::StatusOr<std::unique_ptr<Engine>> engine = Python(
      "omnistage_engines.sim_llm", "SimLlm", {{"prefix_cache_blocks", "8"}, {"block_tokens", "4"}});
  ASSERT_TRUE(engine.ok()) << engine.status();
  EXPECT_EQ((*engine)->prefix_cache().block_tokens, 4);
  EXPECT_EQ((*engine)->prefix_cache().capacity_blocks, 8);

  // 100 bytes: 25 tokens, 6 whole blocks of 16 bytes.
  const std::string prompt(
      "You are a helpful assistant. Answer briefly and kindly, in plain words, and say so when "
      "unsure. Hiya");
  ASSERT_EQ(prompt.size(), 100u);
  ASSERT_TRUE(AddAndStep(**engine, TextRequest("a", prompt)).ok());
  ExpectStats((*engine)->prefix_cache_stats(), 6, 0, 25);
  const std::vector<CacheChange> changes = (*engine)->TakeCacheChanges();
  const std::vector<uint64_t> names = TextBlockHashes(prompt, 4);
  ASSERT_THAT(changes, SizeIs(6));
  for (size_t i = 0; i < names.size(); ++i) {  // stored deepest first
    EXPECT_EQ(changes[i].block, names[names.size() - 1 - i]) << i;
    EXPECT_TRUE(changes[i].stored) << i;
  }
  EXPECT_THAT((*engine)->TakeCacheChanges(), IsEmpty());

  ASSERT_TRUE(AddAndStep(**engine, TextRequest("b", prompt)).ok());
  ExpectStats((*engine)->prefix_cache_stats(), 6, 24, 26);
  EXPECT_THAT((*engine)->TakeCacheChanges(), IsEmpty());  // touched, not stored
}

TEST(PythonEngineCacheTest, AnEngineThatDeclaresNoneHasNone) {
  for (const auto& [module, cls] : std::map<std::string, std::string>{
           {"omnistage_engines.sim_llm", "SimLlm"}, {"test_engines", "Echo"}}) {
    SCOPED_TRACE(cls);
    absl::StatusOr<std::unique_ptr<Engine>> engine = Python(module, cls);
    ASSERT_TRUE(engine.ok()) << engine.status();
    EXPECT_EQ((*engine)->prefix_cache().block_tokens, 0);
    ASSERT_TRUE(AddAndStep(**engine, TextRequest("a", "some words to prefill")).ok());
    ExpectStats((*engine)->prefix_cache_stats(), 0, 0, 0);
    EXPECT_THAT((*engine)->TakeCacheChanges(), IsEmpty());
  }
}

TEST(PythonEngineCacheTest, ItsMethodsReportFiguresAndEveryBlockName) {
  absl::StatusOr<std::unique_ptr<Engine>> engine = Python("test_engines", "Caching");
  ASSERT_TRUE(engine.ok()) << engine.status();
  EXPECT_EQ((*engine)->prefix_cache().capacity_blocks, 100);
  ASSERT_TRUE(AddAndStep(**engine, TextRequest("a", "x")).ok());
  ExpectStats((*engine)->prefix_cache_stats(), 1, 16, 2);
  const std::vector<CacheChange> changes = (*engine)->TakeCacheChanges();
  ASSERT_THAT(changes, SizeIs(1));
  EXPECT_EQ(changes[0].block, UINT64_MAX);
  EXPECT_TRUE(changes[0].stored);

  // take_cache_changes is optional: without it, no changes.
  engine = Python("test_engines", "CachingQuietly");
  ASSERT_TRUE(engine.ok()) << engine.status();
  ASSERT_TRUE(AddAndStep(**engine, TextRequest("a", "x")).ok());
  ExpectStats((*engine)->prefix_cache_stats(), 1, 16, 2);
  EXPECT_THAT((*engine)->TakeCacheChanges(), IsEmpty());
}

TEST(PythonEngineCacheTest, AMalformedDeclarationRefusesTheEngineNamingTheClass) {
  absl::Status refused = Python("test_engines", "BadPrefixCache").status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ErrorField(refused), "engine_params.class");
  EXPECT_THAT(refused.message(),
              HasSubstr("test_engines.BadPrefixCache.prefix_cache is (0, 10) (expected "
                        "(block_tokens, capacity_blocks), ints in [1, 4096] and [1, 2147483647], "
                        "or None for no prefix cache)"));

  refused = Python("test_engines", "CacheWithoutStats").status();
  EXPECT_EQ(ErrorField(refused), "engine_params.class");
  EXPECT_THAT(refused.message(),
              HasSubstr("class test_engines.CacheWithoutStats declares a prefix_cache but has no "
                        "method 'prefix_cache_stats'"));
}

// Like load(), they cannot return an error: the next step does, and the engine
// reports nothing more meanwhile.
TEST(PythonEngineCacheTest, ErrorsInTheCacheMethodsAreFatalAtTheNextStep) {
  for (const std::string method : {"prefix_cache_stats", "take_cache_changes"}) {
    SCOPED_TRACE(method);
    absl::StatusOr<std::unique_ptr<Engine>> engine =
        Python("test_engines", "Caching", {{"raise_in", method}});
    ASSERT_TRUE(engine.ok()) << engine.status();
    ASSERT_TRUE(AddAndStep(**engine, TextRequest("a", "x")).ok());
    (*engine)->prefix_cache_stats();
    (*engine)->TakeCacheChanges();
    ExpectStats((*engine)->prefix_cache_stats(), 0, 0, 0);
    EXPECT_THAT((*engine)->TakeCacheChanges(), IsEmpty());
    EXPECT_TRUE((*engine)->HasWork());
    const absl::Status status = (*engine)->Step().status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInternal);
    EXPECT_THAT(status.message(),
                HasSubstr(absl::StrCat("python engine test_engines.Caching: ", method,
                                       " raised ValueError: boom in ", method)));
    EXPECT_THAT(status.message(), HasSubstr("in explode"));
  }

  const std::map<std::string, std::string> malformed = {
      {"prefix_cache_stats",
       "python engine test_engines.Caching: prefix_cache_stats returned (1, 'two', 3) (expected "
       "(blocks, hit_tokens, miss_tokens): ints >= 0, blocks at most the capacity, 100)"},
      {"take_cache_changes",
       "python engine test_engines.Caching: take_cache_changes returned (-1, True) as change 1 "
       "(expected (block, stored): an int in [0, 2**64) and a bool)"},
  };
  for (const auto& [method, expected] : malformed) {
    SCOPED_TRACE(method);
    absl::StatusOr<std::unique_ptr<Engine>> engine =
        Python("test_engines", "Caching", {{"cache_output", "bad"}});
    ASSERT_TRUE(engine.ok()) << engine.status();
    ASSERT_TRUE(AddAndStep(**engine, TextRequest("a", "x")).ok());
    if (method == "prefix_cache_stats") {
      (*engine)->prefix_cache_stats();
    } else {
      EXPECT_THAT((*engine)->TakeCacheChanges(), IsEmpty());
    }
    EXPECT_EQ((*engine)->Step().status(), absl::InternalError(expected));
  }
}

}  // namespace
}  // namespace omnistage
