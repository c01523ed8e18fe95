// Tests for StepCadence: the period comes from back-to-back steps of a busy
// engine only, the phase follows it past the last event seen, and a new
// engine starts over.
#include "orchestrator/core/step_cadence.h"

#include "gtest/gtest.h"

namespace omnistage {
namespace {

constexpr double kEps = 1e-9;
const absl::Time kStart = absl::FromUnixSeconds(1000);

absl::Time At(int ms) { return kStart + absl::Milliseconds(ms); }

TEST(StepCadenceTest, UnknownUntilTwoBackToBackSteps) {
  StepCadence cadence;
  EXPECT_EQ(cadence.UntilStepEnds(At(0)), 0);
  cadence.Step(7, At(0), true);
  EXPECT_EQ(cadence.period(), 0);
  EXPECT_EQ(cadence.UntilStepEnds(At(5)), 0);
  // Step 9 after 7: the gap spans a step not seen; it says nothing.
  cadence.Step(9, At(40), true);
  EXPECT_EQ(cadence.period(), 0);
  cadence.Step(10, At(60), true);
  EXPECT_NEAR(cadence.period(), 0.020, kEps);
}

TEST(StepCadenceTest, ThePhaseFollowsThePeriodPastTheLastEvent) {
  StepCadence cadence;
  for (int step = 1; step <= 5; ++step) cadence.Step(step, At(20 * step), true);
  // The last step ended at 100 ms.
  EXPECT_NEAR(cadence.UntilStepEnds(At(100)), 0.020, kEps);
  EXPECT_NEAR(cadence.UntilStepEnds(At(105)), 0.015, kEps);
  EXPECT_NEAR(cadence.UntilStepEnds(At(119)), 0.001, kEps);
  // Steps this orchestrator did not see (no outputs for it) keep the beat.
  EXPECT_NEAR(cadence.UntilStepEnds(At(147)), 0.013, kEps);
}

// Events come late by how long their way took, never early: the phase is
// the least delayed ones', not the last one's.
TEST(StepCadenceTest, ThePhaseFollowsTheLeastDelayedEvents) {
  StepCadence cadence;
  // Steps end every 20 ms; their events are handled 0, 6, 2 and 6 ms late.
  constexpr int kDelays[] = {0, 6, 2, 6};
  int step = 1;
  for (; step <= 40; ++step) cadence.Step(step, At(20 * step + kDelays[step % 4]), true);
  // The last event (step 40) came 0 ms late; 41's ends at 820 ms.
  EXPECT_NEAR(cadence.UntilStepEnds(At(805)), 0.015, 0.002);
  // Step 41's event 6 ms late: it still ends at 820 ms, 42's at 840.
  cadence.Step(41, At(826), true);
  EXPECT_NEAR(cadence.UntilStepEnds(At(830)), 0.010, 0.002);
}

TEST(StepCadenceTest, ThePeriodIsAnAverageThatFollowsAChange) {
  StepCadence cadence;
  // Events handled in pairs: gaps of 5 and 35 ms average 20.
  int at = 0;
  for (int step = 1; step <= 200; ++step) {
    at += step % 2 == 0 ? 5 : 35;
    cadence.Step(step, At(at), true);
  }
  EXPECT_NEAR(cadence.period(), 0.020, 0.002);
  // The engine slows to 50 ms steps.
  for (int step = 201; step <= 260; ++step) {
    at += 50;
    cadence.Step(step, At(at), true);
  }
  EXPECT_NEAR(cadence.period(), 0.050, 0.001);
}

TEST(StepCadenceTest, ANewEngineStartsOver) {
  StepCadence cadence;
  for (int step = 1; step <= 5; ++step) cadence.Step(step, At(20 * step), true);
  ASSERT_GT(cadence.period(), 0);
  // Its replacement counts from 1 again.
  cadence.Step(1, At(500), true);
  EXPECT_EQ(cadence.period(), 0);
  cadence.Step(2, At(530), true);
  EXPECT_NEAR(cadence.period(), 0.030, kEps);
}

TEST(StepCadenceTest, AGapAfterTheEngineRanOutOfWorkIsNotAStep) {
  StepCadence cadence;
  cadence.Step(1, At(0), true);
  cadence.Step(2, At(20), /*busy=*/false);
  // Idle for 300 ms, then the next request's first step.
  cadence.Step(3, At(340), true);
  EXPECT_NEAR(cadence.period(), 0.020, kEps);
  cadence.Step(4, At(360), true);
  EXPECT_NEAR(cadence.period(), 0.020, kEps);
}

TEST(StepCadenceTest, NotFromAStepIsIgnored) {
  StepCadence cadence;
  cadence.Step(1, At(0), true);
  cadence.Step(0, At(7), true);
  cadence.Step(2, At(20), true);
  EXPECT_NEAR(cadence.period(), 0.020, kEps);
}

}  // namespace
}  // namespace omnistage
