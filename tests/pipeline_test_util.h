// Shared pieces of the multi-process pipeline tests (pipeline_test,
// fault_test): the pipelines they run, requests, and expectations that
// every Generate stream and every idle pipeline must meet. Built on
// PipelineHarness; uses gtest assertions, so only for tests.
#ifndef OMNISTAGE_TESTS_PIPELINE_TEST_UTIL_H_
#define OMNISTAGE_TESTS_PIPELINE_TEST_UTIL_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "protos/orchestrator.pb.h"
#include "tests/pipeline_harness.h"

namespace omnistage {

StageSpec Stage(const std::string& name, const std::string& engine, const std::string& params,
                int replicas, bool final_output, const std::string& modality,
                const std::string& input_mode = "on_finish");

// thinker (text, 1 replica) -> talker (2 replicas, streaming) -> vocoder
// (1 replica): the demo pipeline's shape, with the talker's hashed codes and the
// vocoder's tones (`codes=hashed`, `sound=tones`), whose sizes and timing these
// tests count on (speech: speech_test). `thinker_step_us` sets how long
// a request takes; `vocoder_mode` and `vocoder_params` shape the last stage.
PipelineSpec OmniSpec(int thinker_step_us, const std::string& vocoder_mode = "streaming",
                      const std::string& vocoder_params = "");

// sim_llm "draft" (1 replica, 2 ms steps) -> sim_llm "llm" (2 replicas, 5 ms
// steps, on_finish; final tokens).
PipelineSpec SimSpec();
// The stages of the pipeline config at `path` (its engines, parameters,
// replicas to spawn, outputs and input modes), for PipelineHarness.
absl::StatusOr<PipelineSpec> SpecFromConfig(const std::string& path);

// Starts `spec`; nullptr (with a test failure) if it does not come up.
std::unique_ptr<PipelineHarness> StartPipeline(PipelineSpec spec);

// A long omni request: the thinker writes 100 sentences (seconds of work).
v1::GenerateRequest LongOmniRequest(const std::string& id, const std::string& prompt);

// The stream ended normally on the wire with exactly one terminal, last.
void ExpectOneTerminal(const GenerateResult& r);

int BoundRequests(const v1::PipelineStatus& status, int stage, int replica);
int TotalBound(const v1::PipelineStatus& status);

// Every replica's engine is idle (running == waiting == 0), and the orchestrator
// holds no request and no binding. Otherwise false, with the reason in `why`.
bool PipelineIsIdle(PipelineHarness& pipeline, std::string* why);
void ExpectPipelineBecomesIdle(PipelineHarness& pipeline, absl::Duration timeout);

}  // namespace omnistage

#endif  // OMNISTAGE_TESTS_PIPELINE_TEST_UTIL_H_
