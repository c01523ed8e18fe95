#include "tests/pipeline_test_util.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/modality.h"
#include "orchestrator/config/pipeline_config.h"
#include "gtest/gtest.h"

namespace omnistage {
namespace {

// `defaults` as the YAML flow map a pipeline config takes.
std::string DefaultsYaml(const v1::StageParameters& defaults) {
  std::vector<std::string> entries;
  if (defaults.has_max_tokens())
    entries.push_back(absl::StrCat("max_tokens: ", defaults.max_tokens()));
  if (defaults.has_seed()) entries.push_back(absl::StrCat("seed: ", defaults.seed()));
  if (!defaults.extra().empty()) {
    std::vector<std::string> extra;
    for (const auto& [key, value] : defaults.extra())
      extra.push_back(absl::StrCat(key, ": ", value));
    entries.push_back(absl::StrCat("extra: {", absl::StrJoin(extra, ", "), "}"));
  }
  return entries.empty() ? "" : absl::StrCat("{", absl::StrJoin(entries, ", "), "}");
}

}  // namespace

absl::StatusOr<PipelineSpec> SpecFromConfig(const std::string& path) {
  absl::StatusOr<PipelineConfig> config = LoadPipelineConfig(path);
  if (!config.ok()) return config.status();
  PipelineSpec spec;
  spec.name = config->name;
  for (const StageConfig& stage : config->stages) {
    StageSpec s;
    s.name = stage.name;
    s.engine = stage.engine;
    std::vector<std::string> params;
    for (const auto& [key, value] : stage.engine_params)
      params.push_back(absl::StrCat(key, "=", value));
    s.engine_params = absl::StrJoin(params, ",");
    s.replicas = stage.spawn_replicas;
    s.final_output = stage.final_output;
    s.output_modality = ModalityName(stage.output_modality);
    s.input_mode = stage.input_mode == InputMode::kStreaming ? "streaming" : "on_finish";
    s.defaults = DefaultsYaml(stage.defaults);
    spec.stages.push_back(std::move(s));
  }
  return spec;
}


StageSpec Stage(const std::string& name, const std::string& engine, const std::string& params,
                int replicas, bool final_output, const std::string& modality,
                const std::string& input_mode) {
  StageSpec stage;
  stage.name = name;
  stage.engine = engine;
  stage.engine_params = params;
  stage.replicas = replicas;
  stage.final_output = final_output;
  stage.output_modality = modality;
  stage.input_mode = input_mode;
  return stage;
}

PipelineSpec OmniSpec(int thinker_step_us, const std::string& vocoder_mode,
                      const std::string& vocoder_params) {
  PipelineSpec spec;
  spec.name = "omni";
  spec.stages.push_back(
      Stage("thinker", "thinker",
            absl::StrCat("batch_size=64,step_time_us=", thinker_step_us, ",max_tokens=1000"), 1,
            true, "text"));
  spec.stages.push_back(Stage("talker", "talker",
                              "codes=hashed,batch_size=64,step_time_us=1000,max_tokens=1000000", 2,
                              false, "tokens", "streaming"));
  spec.stages.push_back(
      Stage("vocoder", "vocoder",
            absl::StrCat("sound=tones,batch_size=64,step_time_us=1000,max_tokens=1000000",
                         vocoder_params.empty() ? "" : ",", vocoder_params),
            1, true, "audio", vocoder_mode));
  return spec;
}

PipelineSpec SimSpec() {
  PipelineSpec spec;
  spec.name = "sim";
  spec.stages.push_back(
      Stage("draft", "sim_llm", "batch_size=64,step_time_us=2000", 1, false, "tokens"));
  spec.stages.push_back(
      Stage("llm", "sim_llm", "batch_size=64,step_time_us=5000", 2, true, "tokens"));
  return spec;
}

std::unique_ptr<PipelineHarness> StartPipeline(PipelineSpec spec) {
  absl::StatusOr<std::unique_ptr<PipelineHarness>> pipeline = PipelineHarness::Start(spec);
  EXPECT_TRUE(pipeline.ok()) << pipeline.status();
  return pipeline.ok() ? *std::move(pipeline) : nullptr;
}

void ExpectOneTerminal(const GenerateResult& r) {
  EXPECT_TRUE(r.done) << r.Summary();
  EXPECT_TRUE(r.status.ok()) << r.Summary();
  EXPECT_EQ(r.terminals, 1) << r.Summary();
  EXPECT_EQ(r.responses_after_terminal, 0) << r.Summary();
}

v1::GenerateRequest LongOmniRequest(const std::string& id, const std::string& prompt) {
  return MakeRequest(id, prompt, {StageParams(0, 1000, {{"sentences", "100"}})});
}

int BoundRequests(const v1::PipelineStatus& status, int stage, int replica) {
  return status.stages(stage).replicas(replica).bound_requests();
}

int TotalBound(const v1::PipelineStatus& status) {
  int total = 0;
  for (const v1::StageStatus& stage : status.stages()) {
    for (const v1::ReplicaStatus& replica : stage.replicas()) total += replica.bound_requests();
  }
  return total;
}

bool PipelineIsIdle(PipelineHarness& pipeline, std::string* why) {
  absl::StatusOr<std::vector<std::vector<WorkerStats>>> stats = pipeline.AllStats();
  if (!stats.ok()) {
    *why = std::string(stats.status().message());
    return false;
  }
  for (size_t s = 0; s < stats->size(); ++s) {
    for (size_t r = 0; r < (*stats)[s].size(); ++r) {
      const WorkerStats& w = (*stats)[s][r];
      if (w.running != 0 || w.waiting != 0) {
        *why = absl::StrCat("stage ", s, " replica ", r, ": running=", w.running,
                            " waiting=", w.waiting);
        return false;
      }
    }
  }
  absl::StatusOr<v1::PipelineStatus> status = pipeline.Status();
  if (!status.ok()) {
    *why = std::string(status.status().message());
    return false;
  }
  if (status->in_flight_requests() != 0 || TotalBound(*status) != 0) {
    *why = absl::StrCat("in_flight=", status->in_flight_requests(), " bound=", TotalBound(*status));
    return false;
  }
  return true;
}

void ExpectPipelineBecomesIdle(PipelineHarness& pipeline, absl::Duration timeout) {
  std::string why;
  EXPECT_TRUE(
      Eventually([&] { return PipelineIsIdle(pipeline, &why); }, timeout, absl::Milliseconds(50)))
      << "not idle after " << timeout << ": " << why;
}

}  // namespace omnistage
