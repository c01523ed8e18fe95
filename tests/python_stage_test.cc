// A pipeline with a Python stage (engine: python, sim_llm's Python port) as
// processes: it streams the same tokens as the C++ engine; a Python replica
// killed with SIGKILL fails exactly its own requests; an exception in its step
// is fatal, with the exception's type and message in the requests' errors; a
// step that hangs in Python is reported as stalled and nothing more goes there.
// The exception and the hang happen in the interpreter (test_engines.FaultySimLlm),
// not in the worker's fault hooks around it.
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/pipeline_harness.h"
#include "tests/pipeline_test_util.h"

namespace omnistage {
namespace {

// A Python class as a stage: `engine_params` name it, `params` are its own.
StageSpec PythonStage(const std::string& name, const std::string& engine_params,
                      const std::string& params, int replicas) {
  return Stage(name, "python", absl::StrCat(engine_params, ",", params), replicas, true, "tokens");
}

// sim_llm's Python port as a stage; `params` are sim_llm's own.
StageSpec PythonSimLlm(const std::string& name, const std::string& params, int replicas) {
  return PythonStage(name,
                     "path=stage_worker/engines/python,module=omnistage_engines.sim_llm,"
                     "class=SimLlm",
                     params, replicas);
}

// The port with a step that raises (raise_at_step) or sleeps for good
// (sleep_at_step) in Python; `params` are sim_llm's and those.
StageSpec FaultyPythonSimLlm(const std::string& name, const std::string& params, int replicas) {
  return PythonStage(name,
                     "path=stage_worker/engines/python:stage_worker/engines/python/testdata,"
                     "module=test_engines,class=FaultySimLlm",
                     params, replicas);
}

// SimSpec() with its second stage in Python.
PipelineSpec MixedSpec(const std::string& llm_params = "batch_size=64,step_time_us=5000") {
  PipelineSpec spec = SimSpec();
  spec.name = "mixed";
  spec.stages[1] = PythonSimLlm("llm", llm_params, 2);
  return spec;
}

std::vector<v1::GenerateRequest> Requests(const std::string& prefix, int n, int tokens) {
  std::vector<v1::GenerateRequest> requests;
  for (int i = 0; i < n; ++i) {
    requests.push_back(MakeRequest(absl::StrCat(prefix, i), absl::StrCat("prompt number ", i),
                                   {StageParams(0, 20), StageParams(1, tokens)}));
  }
  return requests;
}

TEST(PythonStageProcessTest, StreamsTheSameTokensAsTheCppEngine) {
  std::vector<GenerateResult> cpp;
  {
    std::unique_ptr<PipelineHarness> pipeline = StartPipeline(SimSpec());
    ASSERT_NE(pipeline, nullptr);
    cpp = pipeline->GenerateAll(Requests("r", 8, 50));
  }
  std::unique_ptr<PipelineHarness> pipeline = StartPipeline(MixedSpec());
  ASSERT_NE(pipeline, nullptr);
  std::vector<GenerateResult> python = pipeline->GenerateAll(Requests("r", 8, 50));
  for (size_t i = 0; i < python.size(); ++i) {
    ExpectOneTerminal(python[i]);
    EXPECT_EQ(python[i].terminal.finish_reason(), v1::FINISH_REASON_LENGTH) << python[i].Summary();
    EXPECT_EQ(python[i].tokens.size(), 50u);
    EXPECT_EQ(python[i].tokens, cpp[i].tokens) << "request " << i;
  }
}

TEST(PythonStageProcessTest, KilledPythonReplicaFailsOnlyItsOwnRequests) {
  constexpr int kRequests = 16;
  constexpr int kVictim = 0;
  std::unique_ptr<PipelineHarness> pipeline = StartPipeline(MixedSpec());
  ASSERT_NE(pipeline, nullptr);
  std::vector<std::unique_ptr<GenerateCall>> calls;
  for (const v1::GenerateRequest& request : Requests("fault-", kRequests, 400)) {
    calls.push_back(pipeline->StartGenerate(request));
  }
  for (auto& call : calls) {
    ASSERT_TRUE(call->WaitForOutput(absl::Seconds(30))) << call->Snapshot().Summary();
  }
  absl::StatusOr<v1::PipelineStatus> status = pipeline->Status();
  ASSERT_TRUE(status.ok()) << status.status();
  const int bound_to_victim = BoundRequests(*status, 1, kVictim);
  pipeline->KillWorker(1, kVictim);

  int failed = 0;
  for (auto& call : calls) {
    GenerateResult r = call->Wait(absl::Seconds(60));
    ExpectOneTerminal(r);
    if (r.terminal.finish_reason() == v1::FINISH_REASON_ERROR) {
      ++failed;
      EXPECT_EQ(r.terminal.error().stage_id(), 1) << r.Summary();
      EXPECT_EQ(r.terminal.error().replica(), kVictim) << r.Summary();
      EXPECT_TRUE(absl::StrContains(r.terminal.error().message(), "died")) << r.Summary();
    } else {
      EXPECT_EQ(r.terminal.finish_reason(), v1::FINISH_REASON_LENGTH) << r.Summary();
      EXPECT_EQ(r.tokens.size(), 400u) << r.Summary();
    }
  }
  EXPECT_GE(failed, 1);
  EXPECT_LT(failed, kRequests);
  EXPECT_EQ(failed, bound_to_victim);
  absl::StatusOr<v1::PipelineStatus> after = pipeline->Status();
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->in_flight_requests(), 0);
  EXPECT_EQ(TotalBound(*after), 0);
}

// The Python step raises RuntimeError: the worker's fatal event carries it, its
// requests fail naming it, and the process exits 1.
TEST(PythonStageProcessTest, ExceptionInAPythonStepIsFatalAndNamed) {
  PipelineSpec spec = MixedSpec();
  spec.stages[1] = FaultyPythonSimLlm("llm", "batch_size=64,step_time_us=2000,raise_at_step=30", 1);
  std::unique_ptr<PipelineHarness> pipeline = StartPipeline(spec);
  ASSERT_NE(pipeline, nullptr);
  GenerateResult r = pipeline->Generate(
      MakeRequest("doomed", "x", {StageParams(0, 5), StageParams(1, 100)}), absl::Seconds(30));
  ExpectOneTerminal(r);
  EXPECT_EQ(r.terminal.finish_reason(), v1::FINISH_REASON_ERROR) << r.Summary();
  EXPECT_EQ(r.terminal.error().stage_id(), 1) << r.Summary();
  EXPECT_TRUE(absl::StrContains(r.terminal.error().message(),
                                "python engine test_engines.FaultySimLlm: step raised "
                                "RuntimeError: raised at step 30 (raise_at_step)"))
      << r.Summary();
  EXPECT_EQ(pipeline->worker_process(1, 0)->Wait(absl::Seconds(10)), 1);
}

TEST(PythonStageProcessTest, StepHangingInPythonIsReportedAndNothingMoreGoesThere) {
  PipelineSpec spec;
  spec.name = "hanging";
  spec.keepalive_ms = 600000;
  spec.keepalive_timeout_ms = 600000;
  spec.request_idle_timeout_ms = 600000;
  StageSpec llm = FaultyPythonSimLlm("llm", "batch_size=64,step_time_us=2000,sleep_at_step=100", 2);
  llm.worker_flags = {"--stall_timeout_ms=300", "--stall_exit_ms=0"};
  spec.stages.push_back(llm);
  std::unique_ptr<PipelineHarness> pipeline = StartPipeline(spec);
  ASSERT_NE(pipeline, nullptr);
  GenerateResult victim =
      pipeline->Generate(MakeRequest("victim", "long", {StageParams(0, 1000)}), absl::Seconds(20));
  ExpectOneTerminal(victim);
  EXPECT_EQ(victim.terminal.finish_reason(), v1::FINISH_REASON_ERROR) << victim.Summary();
  EXPECT_TRUE(absl::StrContains(victim.terminal.error().message(),
                                "stage 0 (llm) replica 0 stalled: step 100 has run for"))
      << victim.Summary();
  std::vector<v1::GenerateRequest> requests;
  for (int i = 0; i < 6; ++i) {
    requests.push_back(MakeRequest(absl::StrCat("after-", i), "short", {StageParams(0, 5)}));
  }
  for (const GenerateResult& r : pipeline->GenerateAll(requests)) {
    ExpectOneTerminal(r);
    EXPECT_EQ(r.terminal.finish_reason(), v1::FINISH_REASON_LENGTH) << r.Summary();
  }
}

}  // namespace
}  // namespace omnistage
