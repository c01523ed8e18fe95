#include "stage_worker/engines/registry.h"

#include "absl/strings/str_cat.h"
#include "common/field_error.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "stage_worker/engines/base/fault_injection.h"
#include "stage_worker/engines/testing/engine_harness.h"

namespace omnistage {
namespace {

using engine_testing::Collected;
using engine_testing::MakeRequest;
using engine_testing::RunToCompletion;
using ::testing::ElementsAre;

TEST(RegistryTest, KnowsTheBuiltInEngines) {
  EXPECT_THAT(EngineNames(), ElementsAre("sim_llm", "listener", "thinker", "talker", "vocoder", "python"));
  for (const std::string& name : EngineNames()) {
    std::map<std::string, std::string> params = {{"batch_size", "3"}};
    if (name == "python") {  // sim_llm's Python port
      params.insert({{"path", "stage_worker/engines/python"},
                     {"module", "omnistage_engines.sim_llm"},
                     {"class", "SimLlm"}});
    }
    absl::StatusOr<std::unique_ptr<Engine>> engine = CreateEngine(name, params);
    ASSERT_TRUE(engine.ok()) << name << ": " << engine.status();
    EXPECT_EQ((*engine)->capacity(), 3);
    EXPECT_EQ((*engine)->Utility("ping", {})->string_value(), "pong");
  }
}

// The fault hooks (fault_injection.h) wrap any engine that asks, C++ or python,
// and only those; the engine never sees their keys.
TEST(RegistryTest, WrapsEnginesThatAskForFaultHooks) {
  for (const std::string& name : EngineNames()) {
    SCOPED_TRACE(name);
    std::map<std::string, std::string> params;
    if (name == "listener") params = {{"batch_size", "1"}};  // a decoder takes a while
    if (name == "python") {
      params = {{"path", "stage_worker/engines/python"},
                {"module", "omnistage_engines.sim_llm"},
                {"class", "SimLlm"}};
    }
    std::unique_ptr<Engine> bare = engine_testing::MustCreate(name, params);
    ASSERT_NE(bare, nullptr);
    EXPECT_EQ(dynamic_cast<FaultInjectingEngine*>(bare.get()), nullptr);

    params["fail_at_step"] = "1";
    params["test_utilities"] = "true";
    std::unique_ptr<Engine> wrapped = engine_testing::MustCreate(name, params);
    ASSERT_NE(wrapped, nullptr);
    EXPECT_NE(dynamic_cast<FaultInjectingEngine*>(wrapped.get()), nullptr);
    google::protobuf::ListValue args;
    args.add_values()->set_number_value(6);
    args.add_values()->set_number_value(3);
    EXPECT_EQ(wrapped->Utility("div", args)->number_value(), 2);
    EXPECT_EQ(wrapped->Step().status(),
              absl::InternalError(
                  absl::StrCat("engine ", name, ": injected failure at step 1 (fail_at_step)")));

    params["fail_at_step"] = "x";
    absl::Status refused = CreateEngine(name, params).status();
    EXPECT_EQ(ErrorField(refused), "engine_params.fail_at_step");
    EXPECT_THAT(std::string(refused.message()),
                ::testing::StartsWith(absl::StrCat("engine ", name, ": parameter fail_at_step: ")));
  }
}

TEST(RegistryTest, RejectsUnknownEnginesAndParameters) {
  absl::Status unknown = CreateEngine("x", {}).status();
  EXPECT_EQ(unknown.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(unknown.message(), "unknown engine 'x' (known: sim_llm, listener, thinker, talker, vocoder, python)");
  EXPECT_THAT(std::string(CreateEngine("talker", {{"vocab_size", "5"}}).status().message()),
              ::testing::StartsWith("engine talker: unknown parameter 'vocab_size'"));
}

// thinker -> talker -> vocoder, each stage's output streamed into the next as it
// is produced, as the orchestrator's streaming mode does (with the hashed codes
// and tones, whose sizes are simple to state).
TEST(RegistryTest, StreamsThroughAPipeline) {
  std::unique_ptr<Engine> thinker = *CreateEngine("thinker", {});
  std::unique_ptr<Engine> talker =
      *CreateEngine("talker", {{"max_tokens", "100000"}, {"codes", "hashed"}});
  std::unique_ptr<Engine> vocoder =
      *CreateEngine("vocoder", {{"max_tokens", "100000"}, {"sound", "tones"}});
  ASSERT_TRUE(thinker->Add(MakeRequest("r", {TextPayload("Say hi")})).ok());
  ASSERT_TRUE(talker->Add(MakeRequest("r", {}, false)).ok());
  ASSERT_TRUE(vocoder->Add(MakeRequest("r", {}, false)).ok());

  std::string text;
  std::string pcm;
  bool done = false;
  for (int step = 0; step < 10000 && !done; ++step) {
    for (auto [from, to] :
         {std::pair(thinker.get(), talker.get()), std::pair(talker.get(), vocoder.get())}) {
      if (!from->HasWork()) continue;
      absl::StatusOr<std::vector<v1::RequestOutput>> outputs = from->Step();
      ASSERT_TRUE(outputs.ok());
      for (const v1::RequestOutput& output : *outputs) {
        std::vector<v1::Payload> payloads(output.payloads().begin(), output.payloads().end());
        if (from == thinker.get()) {
          for (const auto& p : payloads) text += p.text().text();
        }
        ASSERT_TRUE(to->AppendInput("r", payloads, output.finished()).ok());
      }
    }
    if (vocoder->HasWork()) {
      absl::StatusOr<std::vector<v1::RequestOutput>> outputs = vocoder->Step();
      ASSERT_TRUE(outputs.ok());
      for (const v1::RequestOutput& output : *outputs) {
        for (const auto& p : output.payloads()) pcm += p.audio().pcm_s16le();
        done = output.finished();
      }
    }
  }
  ASSERT_TRUE(done);
  // 2 codes per text byte, 960 samples of 2 bytes per code.
  EXPECT_EQ(pcm.size(), text.size() * 2 * 960 * 2);
}

}  // namespace
}  // namespace omnistage
