// The pipeline configs the repository ships (the local demos and the one the
// Kubernetes manifests mount) load and say what their docs say, and loading a
// file names it in every error.
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "orchestrator/config/pipeline_config.h"

namespace omnistage {
namespace {

using ::testing::StartsWith;

TEST(PipelineConfigFilesTest, ShippedChatConfigRoutesByCache) {
  absl::StatusOr<PipelineConfig> config =
      LoadPipelineConfig("pipelines/local_chat.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  ASSERT_EQ(config->stages.size(), 1u);
  const StageConfig& thinker = config->stages[0];
  EXPECT_EQ(thinker.pick, PickPolicy::kPrefixAware);
  EXPECT_TRUE(thinker.prefix.precise);
  EXPECT_EQ(thinker.spawn_replicas, 3);
  EXPECT_EQ(thinker.engine_params.at("prefix_cache_blocks"), "4096");
  EXPECT_EQ(thinker.engine_params.at("prefill_us_per_token"), "20");
}

TEST(PipelineConfigFilesTest, ShippedOmniConfigIsTheDemoPipeline) {
  absl::StatusOr<PipelineConfig> config =
      LoadPipelineConfig("pipelines/local_omni.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  ASSERT_EQ(config->stages.size(), 3u);
  const StageConfig& thinker = config->stages[0];
  const StageConfig& talker = config->stages[1];
  const StageConfig& vocoder = config->stages[2];
  EXPECT_EQ(thinker.engine, "thinker");
  EXPECT_EQ(thinker.spawn_replicas, 1);
  EXPECT_TRUE(thinker.final_output);
  EXPECT_EQ(thinker.output_modality, v1::MODALITY_TEXT);
  EXPECT_EQ(thinker.engine_params.at("step_time_us"), "2000");
  EXPECT_EQ(talker.engine, "talker");
  EXPECT_EQ(talker.spawn_replicas, 2);
  EXPECT_FALSE(talker.final_output);
  EXPECT_EQ(talker.output_modality, v1::MODALITY_TOKENS);
  EXPECT_EQ(talker.input_mode, InputMode::kStreaming);
  EXPECT_EQ(vocoder.engine, "vocoder");
  EXPECT_EQ(vocoder.spawn_replicas, 1);
  EXPECT_TRUE(vocoder.final_output);
  EXPECT_EQ(vocoder.output_modality, v1::MODALITY_AUDIO);
  EXPECT_EQ(vocoder.input_mode, InputMode::kStreaming);
}

TEST(PipelineConfigFilesTest, ShippedTtsConfigSpeaksStreamedText) {
  absl::StatusOr<PipelineConfig> config = LoadPipelineConfig("pipelines/local_tts.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  ASSERT_EQ(config->stages.size(), 2u);
  const StageConfig& talker = config->stages[0];
  const StageConfig& vocoder = config->stages[1];
  EXPECT_EQ(talker.engine, "talker");
  EXPECT_FALSE(talker.final_output);
  EXPECT_EQ(vocoder.engine, "vocoder");
  EXPECT_TRUE(vocoder.final_output);
  EXPECT_EQ(vocoder.output_modality, v1::MODALITY_AUDIO);
  EXPECT_EQ(vocoder.input_mode, InputMode::kStreaming);
  EXPECT_EQ(config->input_idle_timeout, absl::Minutes(2));
}

TEST(PipelineConfigFilesTest, ShippedVoiceAgentConfigListensFirst) {
  absl::StatusOr<PipelineConfig> config =
      LoadPipelineConfig("pipelines/local_voice_agent.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  ASSERT_EQ(config->stages.size(), 4u);
  const std::vector<std::string> engines = {"listener", "thinker", "talker", "vocoder"};
  for (size_t s = 0; s < engines.size(); ++s) {
    EXPECT_EQ(config->stages[s].name, engines[s]);
    EXPECT_EQ(config->stages[s].engine, engines[s]);
  }
  const StageConfig& listener = config->stages[0];
  EXPECT_EQ(listener.spawn_replicas, 1);
  EXPECT_TRUE(listener.final_output);  // the client sees what was heard
  EXPECT_EQ(listener.output_modality, v1::MODALITY_TEXT);
  EXPECT_EQ(listener.engine_params.at("batch_size"), "4");
  const StageConfig& thinker = config->stages[1];
  EXPECT_TRUE(thinker.final_output);
  EXPECT_EQ(thinker.input_mode, InputMode::kOnFinish);
  EXPECT_EQ(thinker.engine_params.at("step_time_us"), "2000");
  EXPECT_EQ(config->stages[2].spawn_replicas, 2);
  EXPECT_EQ(config->stages[2].input_mode, InputMode::kStreaming);
  EXPECT_TRUE(config->stages[3].final_output);
  EXPECT_EQ(config->stages[3].output_modality, v1::MODALITY_AUDIO);
  EXPECT_EQ(config->stages[3].input_mode, InputMode::kStreaming);
}

TEST(PipelineConfigFilesTest, ShippedSimConfigIsOneFastStage) {
  absl::StatusOr<PipelineConfig> config = LoadPipelineConfig("pipelines/local_sim.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  ASSERT_EQ(config->stages.size(), 1u);
  EXPECT_EQ(config->stages[0].engine, "sim_llm");
  EXPECT_EQ(config->stages[0].spawn_replicas, 1);
  EXPECT_TRUE(config->stages[0].final_output);
  EXPECT_EQ(config->stages[0].output_modality, v1::MODALITY_TOKENS);
  EXPECT_EQ(config->stages[0].engine_params.at("step_time_us"), "0");
}

// The config the Kubernetes manifests mount: the demo pipeline with every
// stage's replicas from its headless Service.
TEST(PipelineConfigFilesTest, ShippedKubernetesConfigDiscoversEveryStage) {
  absl::StatusOr<PipelineConfig> config = LoadPipelineConfig("deploy/kubernetes/base/pipeline.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  ASSERT_EQ(config->stages.size(), 3u);
  const std::vector<std::string> names = {"thinker", "talker", "vocoder"};
  for (size_t s = 0; s < names.size(); ++s) {
    const StageConfig& stage = config->stages[s];
    EXPECT_EQ(stage.name, names[s]);
    EXPECT_EQ(stage.engine, names[s]);
    ASSERT_TRUE(stage.discovery.has_value()) << names[s];
    EXPECT_EQ(stage.discovery->name, "omnistage-" + names[s]);
    EXPECT_EQ(stage.discovery->port, 50061);
    EXPECT_EQ(stage.origin(), "dns:omnistage-" + names[s]);
  }
  // The orchestrator replicas find each other through their headless Service.
  ASSERT_TRUE(config->peers.discovery.has_value());
  EXPECT_EQ(config->peers.discovery->name, "omnistage-orchestrator-peers");
  EXPECT_EQ(config->peers.discovery->port, 50052);
  EXPECT_EQ(config->stages[1].input_mode, InputMode::kStreaming);
  EXPECT_EQ(config->drain_timeout, absl::Seconds(20));
}

TEST(PipelineConfigFilesTest, LoadNamesTheFile) {
  absl::Status missing = LoadPipelineConfig("no/such/config.yaml").status();
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(missing.message()), StartsWith("no/such/config.yaml: "));

  absl::Status directory = LoadPipelineConfig("pipelines").status();
  EXPECT_EQ(directory.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(directory.message()), StartsWith("pipelines: "));

  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string path = absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/bad_pipeline.yaml");
  std::ofstream(path) << "stages: []\n";
  absl::Status bad = LoadPipelineConfig(path).status();
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.message(), path + ": stages: expected at least one stage, got none");
}

}  // namespace
}  // namespace omnistage
