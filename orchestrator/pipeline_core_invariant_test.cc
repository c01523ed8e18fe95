// The core's invariants are enforced, not only asserted by tests: a call from off
// the event loop's thread crashes a debug build and is counted in an optimized
// one (PipelineStatus.invariant_violations).
#include <thread>

#include "orchestrator/pipeline_core.h"
#include "orchestrator/pipeline_core_test_harness.h"

namespace omnistage {
namespace pipeline_core_test {
namespace {

#ifndef NDEBUG
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
#else
TEST_F(PipelineCoreTest, CallOffTheLoopThreadIsCounted) {
  Build();
  std::thread stranger([this] { core().Status(); });
  stranger.join();
  EXPECT_EQ(core().Status().invariant_violations(), 1u);
}
#endif

TEST_F(PipelineCoreTest, HealthyCoreReportsNoViolations) {
  Build();
  auto sink = Gen("r1", {v1::MODALITY_TEXT});
  Done(0, 0, "r1", {Text("ok")});
  EXPECT_EQ(core().Status().invariant_violations(), 0u);
}

}  // namespace
}  // namespace pipeline_core_test
}  // namespace omnistage
