#include "orchestrator/core/latency_predictor.h"

#include "gtest/gtest.h"

namespace omnistage {
namespace {

using Lead = LatencyPredictor::Lead;

TEST(LatencyPredictorTest, AnswersOnceAModelHasEnoughObservations) {
  LatencyPredictor predictor;
  EXPECT_EQ(predictor.PredictWait(3, -1), std::nullopt);
  for (int i = 0; i < LatencyPredictor::kMinSamples - 1; ++i) predictor.LearnWait(i, -1, 0.1 * i);
  EXPECT_EQ(predictor.PredictWait(3, -1), std::nullopt);
  predictor.LearnWait(2, -1, 0.2);
  ASSERT_TRUE(predictor.PredictWait(3, -1).has_value());
  // 100 ms per request ahead.
  EXPECT_NEAR(*predictor.PredictWait(3, -1), 0.3, 0.01);
}

// With estimates from the running requests, the model learns their bias and
// answers from them; without one it answers by the requests ahead.
TEST(LatencyPredictorTest, AWaitEstimateIsCorrectedByWhatTheWaitsWere) {
  LatencyPredictor predictor;
  // The estimates run 20% short, 10 ms late.
  for (double estimate : {0.05, 0.1, 0.2, 0.4}) {
    predictor.LearnWait(1, estimate, 0.01 + 1.2 * estimate);
  }
  ASSERT_TRUE(predictor.PredictWait(1, 0.3).has_value());
  EXPECT_NEAR(*predictor.PredictWait(1, 0.3), 0.37, 0.005);
  // By the requests ahead alone: somewhere among the waits seen.
  ASSERT_TRUE(predictor.PredictWait(1, -1).has_value());
  EXPECT_GT(*predictor.PredictWait(1, -1), 0.07);
  EXPECT_LT(*predictor.PredictWait(1, -1), 0.49);
}

// Each stage, replica and lead has its own model: a slow replica does not
// make its stage's other replicas look slow.
TEST(LatencyPredictorTest, EachReplicaLearnsItsOwnLeads) {
  LatencyPredictor predictor;
  for (int running = 0; running < 4; ++running) {
    const LeadFeatures features{static_cast<double>(running), 0.1};
    predictor.LearnLead(1, 0, Lead::kFirstOutput, features, 0.010 + 0.002 * running);
    predictor.LearnLead(1, 1, Lead::kFirstOutput, features, 0.050 + 0.010 * running);
    predictor.LearnLead(1, 0, Lead::kDone, features, 0.5);
  }
  const LeadFeatures now{2, 0.1};
  EXPECT_NEAR(*predictor.PredictLead(1, 0, Lead::kFirstOutput, now), 0.014, 0.002);
  EXPECT_NEAR(*predictor.PredictLead(1, 1, Lead::kFirstOutput, now), 0.070, 0.005);
  EXPECT_NEAR(*predictor.PredictLead(1, 0, Lead::kDone, now), 0.5, 0.01);
  EXPECT_EQ(predictor.PredictLead(1, 1, Lead::kDone, now), std::nullopt);
  EXPECT_EQ(predictor.PredictLead(0, 0, Lead::kFirstOutput, now), std::nullopt);
}

}  // namespace
}  // namespace omnistage
