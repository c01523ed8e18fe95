// The core's invariants are enforced, not only asserted by tests: a call from off
// the event loop's thread crashes a debug build and is logged and counted in an
// optimized one (PipelineStatus.invariant_violations).
#include <thread>

#include "common/invariant.h"
#include "orchestrator/core/pipeline_core.h"
#include "orchestrator/core/testing/pipeline_core_harness.h"

namespace omnistage {
namespace pipeline_core_test {
namespace {

using PipelineCoreDeathTest = PipelineCoreTest;

TEST_F(PipelineCoreDeathTest, CallOffTheLoopThreadCrashes) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  Build();
  EXPECT_DEATH(
      {
        std::thread stranger([this] { Gen("r1"); });
        stranger.join();
      },
      "broken invariant .*PipelineCore called off its event loop's thread");
}

// As an optimized build does it: logged, counted, and the process goes on.
TEST_F(PipelineCoreTest, CallOffTheLoopThreadIsCounted) {
  SetInvariantMode(InvariantMode::kReport);
  Build();
  const uint64_t before = core().Status().invariant_violations();
  std::thread stranger([this] { core().Status(); });
  stranger.join();
  SetInvariantMode(InvariantMode::kCrash);
  EXPECT_EQ(core().Status().invariant_violations(), before + 1);
}

TEST_F(PipelineCoreTest, HealthyCoreReportsNoViolations) {
  Build();
  const uint64_t before = core().Status().invariant_violations();
  auto sink = Gen("r1", {v1::MODALITY_TEXT});
  Done(0, 0, "r1", {Text("ok")});
  EXPECT_EQ(core().Status().invariant_violations(), before);
}

}  // namespace
}  // namespace pipeline_core_test
}  // namespace omnistage
