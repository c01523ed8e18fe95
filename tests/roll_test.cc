// Graceful replacement of workers, as processes: a worker sent SIGTERM drains —
// the orchestrator stops sending it requests at once, it finishes the ones it has
// and exits 0 — so replacing every replica of a stage one by one under load fails
// no request and changes no output; and what outlives the drain timeout ends with
// an error naming the stage and replica.
#include <signal.h>

#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/pipeline_harness.h"
#include "tests/pipeline_test_util.h"
#include "tests/steady_load.h"

namespace omnistage {
namespace {

TEST(PipelineRollTest, ReplacingEveryReplicaOneByOneUnderLoadFailsNothing) {
  PipelineSpec spec;
  spec.name = "roll";
  StageSpec llm = Stage("llm", "sim_llm", "batch_size=64,step_time_us=2000", 3, true, "tokens");
  llm.worker_flags = {"--drain_timeout_ms=20000"};
  spec.stages.push_back(llm);
  std::unique_ptr<PipelineHarness> pipeline = StartPipeline(spec);
  ASSERT_NE(pipeline, nullptr);

  SteadyLoad load(pipeline.get());
  load.Start(32);
  absl::SleepFor(absl::Milliseconds(300));
  for (int replica = 0; replica < 3; ++replica) {
    const std::string before = pipeline->worker_instance(0, replica);
    pipeline->worker_process(0, replica)->Signal(SIGTERM);
    EXPECT_EQ(pipeline->worker_process(0, replica)->Wait(absl::Seconds(30)), 0)
        << "replica " << replica << " did not drain and exit 0";
    ASSERT_TRUE(pipeline->RestartWorker(0, replica).ok());
    ASSERT_TRUE(pipeline->WaitAllAlive(absl::Seconds(20)).ok());
    EXPECT_NE(pipeline->worker_instance(0, replica), before);
    absl::SleepFor(absl::Milliseconds(200));
  }
  const int identical = load.FinishAndCheck();
  EXPECT_GT(identical, 100) << "too little load to mean anything";
  std::cout << identical << " requests through the roll, none failed" << std::endl;
  ExpectPipelineBecomesIdle(*pipeline, absl::Seconds(20));
}

TEST(PipelineRollTest, WhatOutlivesTheDrainTimeoutEndsNamingTheReplica) {
  PipelineSpec spec;
  spec.name = "drain";
  StageSpec llm = Stage("llm", "sim_llm", "batch_size=64,step_time_us=2000", 1, true, "tokens");
  llm.worker_flags = {"--drain_timeout_ms=300"};
  spec.stages.push_back(llm);
  std::unique_ptr<PipelineHarness> pipeline = StartPipeline(spec);
  ASSERT_NE(pipeline, nullptr);
  std::unique_ptr<GenerateCall> call =
      pipeline->StartGenerate(MakeRequest("long", "long", {StageParams(0, 100000)}));
  ASSERT_TRUE(call->WaitForOutput(absl::Seconds(30)));
  const std::string instance = pipeline->worker_instance(0, 0);
  pipeline->worker_process(0, 0)->Signal(SIGTERM);
  const GenerateResult r = call->Wait(absl::Seconds(10));
  ExpectOneTerminal(r);
  EXPECT_EQ(r.terminal.finish_reason(), v1::FINISH_REASON_ERROR) << r.Summary();
  EXPECT_EQ(r.terminal.error().code(), static_cast<int>(absl::StatusCode::kAborted));
  EXPECT_EQ(r.terminal.error().instance_id(), instance);
  EXPECT_EQ(r.terminal.error().message(),
            "stage 0 (llm) replica 0 stopped the request: stopped when the worker's drain "
            "timeout (300ms) passed");
  EXPECT_EQ(pipeline->worker_process(0, 0)->Wait(absl::Seconds(10)), 0);
}

}  // namespace
}  // namespace omnistage
