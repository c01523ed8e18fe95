#include "tests/hpa_replay.h"

#include "gtest/gtest.h"

namespace omnistage {
namespace {

absl::Time At(int seconds) { return absl::FromUnixSeconds(1000 + seconds); }

TEST(HpaReplayTest, ScalesUpToTheMetricOverTheTargetAtOnce) {
  HpaReplay hpa({});
  EXPECT_EQ(hpa.Decide(At(0), 1, 3.2), 4);
  HpaOptions half;
  half.target = 0.5;
  EXPECT_EQ(HpaReplay(half).Decide(At(0), 1, 1.2), 3);
}

TEST(HpaReplayTest, WithinTheToleranceNothingChanges) {
  HpaReplay hpa({});
  EXPECT_EQ(hpa.Decide(At(0), 2, 2.19), 2);
  EXPECT_EQ(hpa.Decide(At(1), 2, 1.81), 2);
  EXPECT_EQ(hpa.Decide(At(2), 2, 2.3), 3);
}

TEST(HpaReplayTest, ScalesDownOnlyToTheHighestCountOfTheWindow) {
  HpaOptions options;
  options.down_stabilization = absl::Seconds(10);
  HpaReplay hpa(options);
  EXPECT_EQ(hpa.Decide(At(0), 1, 5), 5);
  EXPECT_EQ(hpa.Decide(At(5), 5, 1), 5);   // 5 was asked for 5 s ago
  EXPECT_EQ(hpa.Decide(At(9), 5, 2), 5);
  EXPECT_EQ(hpa.Decide(At(11), 5, 2), 2);  // the 5 left the window; 1 and 2 remain
  EXPECT_EQ(hpa.Decide(At(30), 2, 0), 1);  // never below min_replicas
}

TEST(HpaReplayTest, StaysWithinItsBounds) {
  HpaOptions options;
  options.max_replicas = 4;
  HpaReplay hpa(options);
  EXPECT_EQ(hpa.Decide(At(0), 1, 40), 4);
}

}  // namespace
}  // namespace omnistage
