#include "stage_worker/engines/registry.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "stage_worker/engines/test_util.h"

namespace omnistage {
namespace {

using engine_testing::Collected;
using engine_testing::MakeRequest;
using engine_testing::RunToCompletion;
using ::testing::ElementsAre;

TEST(RegistryTest, KnowsTheBuiltInEngines) {
  EXPECT_THAT(EngineNames(), ElementsAre("sim_llm", "thinker", "talker", "vocoder", "python"));
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

TEST(RegistryTest, RejectsUnknownEnginesAndParameters) {
  absl::Status unknown = CreateEngine("x", {}).status();
  EXPECT_EQ(unknown.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(unknown.message(), "unknown engine 'x' (known: sim_llm, thinker, talker, vocoder, python)");
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
