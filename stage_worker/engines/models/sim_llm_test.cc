#include "stage_worker/engines/models/sim_llm.h"

#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "stage_worker/engines/testing/engine_harness.h"

namespace omnistage {
namespace {

using engine_testing::Collected;
using engine_testing::MakeRequest;
using engine_testing::RunToCompletion;
using ::testing::Each;
using ::testing::Ge;
using ::testing::Lt;
using ::testing::SizeIs;

std::unique_ptr<Engine> MustCreate(const std::map<std::string, std::string>& params = {}) {
  return engine_testing::MustCreate(kSimLlmEngineName, params);
}

// The tokens request `input` gets when it runs alone.
std::vector<int32_t> Generate(std::vector<v1::Payload> input, uint64_t seed = 0,
                              uint32_t max_tokens = 16) {
  std::unique_ptr<Engine> engine = MustCreate();
  EXPECT_TRUE(engine->Add(MakeRequest("r", std::move(input), true, max_tokens, seed)).ok());
  return RunToCompletion(engine.get())["r"].tokens;
}

TEST(SimLlmTest, OneTokenPerStepUntilMaxTokens) {
  std::unique_ptr<Engine> engine = MustCreate({{"vocab_size", "100"}});
  ASSERT_TRUE(engine->Add(MakeRequest("a", {TextPayload("hello")}, true, 3)).ok());
  ASSERT_TRUE(engine->Add(MakeRequest("b", {TokensPayload({1, 2})}, true, 5)).ok());
  for (int step = 1; step <= 3; ++step) {
    absl::StatusOr<std::vector<v1::RequestOutput>> outputs = engine->Step();
    ASSERT_TRUE(outputs.ok());
    ASSERT_EQ(outputs->size(), 2u);
    for (const v1::RequestOutput& output : *outputs) {
      ASSERT_EQ(output.payloads_size(), 1);
      EXPECT_EQ(output.payloads(0).tokens().ids_size(), 1);
    }
    EXPECT_EQ((*outputs)[0].finished(), step == 3);
  }
  std::map<std::string, Collected> rest = RunToCompletion(engine.get());
  EXPECT_THAT(rest["b"].tokens, SizeIs(2));
  EXPECT_EQ(rest["b"].finish_reason, v1::FINISH_REASON_LENGTH);
  EXPECT_THAT(rest["b"].tokens, Each(Lt(100)));
  EXPECT_THAT(rest["b"].tokens, Each(Ge(0)));
}

TEST(SimLlmTest, BatchOfTwoAdmitsTheThirdWhenOneFinishes) {
  std::unique_ptr<Engine> engine = MustCreate({{"batch_size", "2"}});
  ASSERT_TRUE(engine->Add(MakeRequest("a", {TextPayload("a")}, true, 2)).ok());
  ASSERT_TRUE(engine->Add(MakeRequest("b", {TextPayload("b")}, true, 4)).ok());
  ASSERT_TRUE(engine->Add(MakeRequest("c", {TextPayload("c")}, true, 1)).ok());
  const std::vector<std::vector<std::string>> expected = {
      {"a", "b"}, {"a", "b"}, {"b", "c"}, {"b"}};
  for (const std::vector<std::string>& ids : expected) {
    absl::StatusOr<std::vector<v1::RequestOutput>> outputs = engine->Step();
    ASSERT_TRUE(outputs.ok());
    std::vector<std::string> got;
    for (const v1::RequestOutput& output : *outputs) {
      got.push_back(output.request_id());
      ASSERT_EQ(output.payloads_size(), 1);
      EXPECT_EQ(output.payloads(0).tokens().ids_size(), 1);
    }
    EXPECT_EQ(got, ids);
  }
  EXPECT_FALSE(engine->HasWork());
}

TEST(SimLlmTest, FaultParameters) {
  std::unique_ptr<Engine> engine = MustCreate({{"fail_at_step", "2"}});
  ASSERT_TRUE(engine->Add(MakeRequest("a", {TextPayload("a")})).ok());
  EXPECT_TRUE(engine->Step().ok());
  absl::Status failed = engine->Step().status();
  EXPECT_EQ(failed.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(failed.message(), "engine sim_llm: injected failure at step 2 (fail_at_step)");

  std::unique_ptr<Engine> no_utilities = MustCreate({{"fail_utilities", "true"}});
  EXPECT_EQ(no_utilities->Utility("ping", {}).status().code(), absl::StatusCode::kInternal);
}

TEST(SimLlmDeathTest, CrashAtStepAborts) {
  std::unique_ptr<Engine> engine = MustCreate({{"crash_at_step", "2"}});
  ASSERT_TRUE(engine->Add(MakeRequest("a", {TextPayload("a")})).ok());
  EXPECT_TRUE(engine->Step().ok());
  EXPECT_DEATH(engine->Step().IgnoreError(), "crashing at step 2");
}

TEST(SimLlmTest, DeterministicPerInputAndSeed) {
  std::vector<int32_t> first = Generate({TextPayload("hello world")});
  EXPECT_THAT(first, SizeIs(16));
  EXPECT_EQ(Generate({TextPayload("hello world")}), first);
  EXPECT_NE(Generate({TextPayload("hello world")}, /*seed=*/7), first);
  EXPECT_NE(Generate({TextPayload("hello there")}), first);
  EXPECT_NE(Generate({TokensPayload({5, 6})}), Generate({TokensPayload({6, 5})}));
}

TEST(SimLlmTest, IndependentOfBatchingAndChunking) {
  std::vector<int32_t> alone = Generate({TextPayload("hello world")});

  std::unique_ptr<Engine> engine = MustCreate({{"batch_size", "1"}});
  ASSERT_TRUE(engine->Add(MakeRequest("other", {TextPayload("zzz")}, true, 5)).ok());
  ASSERT_TRUE(engine->Add(MakeRequest("r", {TextPayload("hel")}, false, 16)).ok());
  EXPECT_TRUE(engine->HasWork());  // "other"
  std::map<std::string, Collected> out = RunToCompletion(engine.get());
  EXPECT_EQ(out.count("r"), 0u);  // waits for its complete prompt
  EXPECT_FALSE(engine->HasWork());
  ASSERT_TRUE(engine->AppendInput("r", {TextPayload("lo"), TextPayload(" world")}, true).ok());
  out = RunToCompletion(engine.get());
  EXPECT_EQ(out["r"].tokens, alone);
}

TEST(SimLlmTest, TextOutputEmitsOneWordPerStep) {
  std::unique_ptr<Engine> engine = MustCreate({{"output", "text"}});
  ASSERT_TRUE(engine->Add(MakeRequest("a", {TextPayload("hi")}, true, 6)).ok());
  std::map<std::string, Collected> out = RunToCompletion(engine.get());
  EXPECT_EQ(out["a"].outputs, 6);
  EXPECT_THAT(std::vector<std::string>(absl::StrSplit(out["a"].text, ' ')), SizeIs(6));
  EXPECT_TRUE(out["a"].tokens.empty());
}

TEST(SimLlmTest, RejectsBadParameters) {
  EXPECT_EQ(CreateSimLlmEngine({{"batch_size", "abc"}}).status().message(),
            "engine sim_llm: parameter batch_size: expected an integer in [1, 65536], "
            "got 'abc'");
  absl::Status unknown = CreateSimLlmEngine({{"bach_size", "2"}}).status();
  EXPECT_EQ(unknown.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(unknown.message()),
              ::testing::StartsWith("engine sim_llm: unknown parameter 'bach_size' (known: "
                                    "batch_size, step_time_us, "));
  EXPECT_FALSE(CreateSimLlmEngine({{"output", "audio"}}).ok());
  EXPECT_FALSE(CreateSimLlmEngine({{"vocab_size", "0"}}).ok());
}

TEST(SimLlmTest, ValidateRejectsAudioInput) {
  std::unique_ptr<Engine> engine = MustCreate();
  v1::Payload audio;
  audio.mutable_audio();
  EXPECT_THAT(std::string(engine->Validate(MakeRequest("a", {audio})).message()),
              ::testing::HasSubstr("is audio"));
}

}  // namespace
}  // namespace omnistage
