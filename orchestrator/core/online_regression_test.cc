#include "orchestrator/core/online_regression.h"

#include <limits>
#include <random>

#include "gtest/gtest.h"

namespace omnistage {
namespace {

TEST(OnlineRegressionTest, KnowsNothingBeforeItsFirstObservation) {
  OnlineRegression model(2);
  EXPECT_EQ(model.samples(), 0);
  EXPECT_EQ(model.Predict({1, 5}), 0);
}

TEST(OnlineRegressionTest, LearnsALineFromAFewPoints) {
  OnlineRegression model(3);
  // 20 ms, plus 5 ms per running request, plus 10 ms per thousand input units.
  auto truth = [](double running, double kunits) {
    return 0.020 + 0.005 * running + 0.010 * kunits;
  };
  for (int i = 0; i < 12; ++i) {
    const double running = i % 5;
    const double kunits = (i * 7 % 4) * 0.5;
    model.Learn({1, running, kunits}, truth(running, kunits));
  }
  EXPECT_EQ(model.samples(), 12);
  EXPECT_NEAR(model.Predict({1, 8, 3}), truth(8, 3), 0.001);
  EXPECT_NEAR(model.Predict({1, 0, 0}), 0.020, 0.001);
}

TEST(OnlineRegressionTest, FollowsAPipelineThatSlowsDown) {
  OnlineRegression model(2, 0.9);
  for (int i = 0; i < 50; ++i) model.Learn({1, static_cast<double>(i % 4)}, 0.1 + 0.01 * (i % 4));
  for (int i = 0; i < 50; ++i) model.Learn({1, static_cast<double>(i % 4)}, 0.3 + 0.02 * (i % 4));
  EXPECT_NEAR(model.Predict({1, 2}), 0.34, 0.01);
}

TEST(OnlineRegressionTest, NoisyObservationsGiveTheirMeanAndAConstantFeatureStaysBounded) {
  std::mt19937 random(7);
  std::normal_distribution<double> noise(0, 0.01);
  OnlineRegression model(2);
  // The second feature never varies: the model must not wind up.
  for (int i = 0; i < 5000; ++i) model.Learn({1, 3}, 0.2 + noise(random));
  EXPECT_NEAR(model.Predict({1, 3}), 0.2, 0.01);
}

TEST(OnlineRegressionTest, NeverPredictsBelowTheSmallestTimeSeenAndIgnoresNonFiniteOnes) {
  OnlineRegression model(2);
  model.Learn({1, 0}, 0.1);
  model.Learn({1, 1}, 0.05);
  model.Learn({1, 2}, 0.02);
  // The line reaches below 0 at 10; the prediction stops at 20 ms.
  EXPECT_EQ(model.Predict({1, 10}), 0.02);
  model.Learn({1, 1}, std::numeric_limits<double>::infinity());
  EXPECT_EQ(model.samples(), 3);
}

TEST(OnlineRegressionTest, AModelWithoutAFloorPredictsBelowZero) {
  OnlineRegression model(2, 0.98, OnlineRegression::Floor::kNone);
  model.Learn({1, 0}, 0.01);
  model.Learn({1, 1}, 0.0);
  model.Learn({1, 2}, -0.01);
  EXPECT_NEAR(model.Predict({1, 3}), -0.02, 1e-6);
}

}  // namespace
}  // namespace omnistage
