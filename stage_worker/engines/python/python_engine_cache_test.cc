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

// The C++ sim_llm and its Python port with the same cache: the same outputs,
// cache figures and changes, step for step (shared, distinct and streamed
// prompts, a request with text and token ids), and the same stats.
TEST(PythonEngineCacheParity, SameCacheAsTheCppEngine) {
  const std::map<std::string, std::string> params = {
      {"batch_size", "2"}, {"prefix_cache_blocks", "40"}, {"block_tokens", "2"},
      {"prefill_us_per_token", "1"}};
  absl::StatusOr<std::unique_ptr<Engine>> cpp = CreateEngine("sim_llm", params);
  absl::StatusOr<std::unique_ptr<Engine>> py =
      Python("omnistage_engines.sim_llm", "SimLlm", params);
  ASSERT_TRUE(cpp.ok()) << cpp.status();
  ASSERT_TRUE(py.ok()) << py.status();
  EXPECT_EQ((*cpp)->prefix_cache().block_tokens, (*py)->prefix_cache().block_tokens);
  EXPECT_EQ((*cpp)->prefix_cache().capacity_blocks, (*py)->prefix_cache().capacity_blocks);
  const std::string shared = "the same system prompt for all, ";
  std::vector<EngineRequest> requests;
  for (int i = 0; i < 7; ++i) {
    EngineRequest r = TextRequest(absl::StrCat("r", i), i % 3 == 0
                                                            ? absl::StrCat(shared, "question ", i)
                                                            : absl::StrCat("other ", i, " ", shared));
    r.params.set_max_tokens(2 + i % 3);
    if (i == 4) r.input.emplace_back().mutable_tokens()->add_ids(-5);
    if (i == 5) r.input_complete = false;
    requests.push_back(r);
  }
  for (Engine* e : {cpp->get(), py->get()}) {
    for (const EngineRequest& r : requests) {
      ASSERT_TRUE(e->Validate(r).ok());
      ASSERT_TRUE(e->ValidateInLoop(r).ok());
      ASSERT_TRUE(e->Add(r).ok());
    }
  }
  for (int step = 1; step < 60; ++step) {
    SCOPED_TRACE(step);
    if (step == 5) {
      std::vector<v1::Payload> rest(1);
      rest[0].mutable_text()->set_text(" and more words to fill blocks");
      ASSERT_TRUE((*cpp)->AppendInput("r5", rest, true).ok());
      ASSERT_TRUE((*py)->AppendInput("r5", rest, true).ok());
    }
    ASSERT_EQ((*cpp)->HasWork(), (*py)->HasWork());
    if (!(*cpp)->HasWork()) break;
    auto a = (*cpp)->Step();
    auto b = (*py)->Step();
    ASSERT_TRUE(a.ok() && b.ok());
    ASSERT_EQ(a->size(), b->size());
    for (size_t i = 0; i < a->size(); ++i) {
      EXPECT_EQ((*a)[i].DebugString(), (*b)[i].DebugString());
    }
    const PrefixCacheStats x = (*cpp)->prefix_cache_stats(), y = (*py)->prefix_cache_stats();
    EXPECT_EQ(x.blocks, y.blocks);
    EXPECT_EQ(x.hit_tokens, y.hit_tokens);
    EXPECT_EQ(x.miss_tokens, y.miss_tokens);
    const std::vector<CacheChange> c = (*cpp)->TakeCacheChanges(), d = (*py)->TakeCacheChanges();
    ASSERT_EQ(c.size(), d.size());
    for (size_t i = 0; i < c.size(); ++i) {
      EXPECT_EQ(c[i].block, d[i].block);
      EXPECT_EQ(c[i].stored, d[i].stored);
    }
  }
  const PrefixCacheStats x = (*cpp)->prefix_cache_stats();
  EXPECT_GT(x.hit_tokens, 0);
  google::protobuf::ListValue none;
  EXPECT_EQ((*cpp)->Utility("stats", none)->DebugString(),
            (*py)->Utility("stats", none)->DebugString());
}

}  // namespace
}  // namespace omnistage
