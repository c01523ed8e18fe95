#include "orchestrator/core/latency_predictor.h"

#include "gtest/gtest.h"

namespace omnistage {
namespace {

using Lead = LatencyPredictor::Lead;

TEST(LatencyPredictorTest, AnswersOnceAModelHasEnoughObservations) {
  LatencyPredictor predictor;
  EXPECT_EQ(predictor.PredictWait(3), std::nullopt);
  for (int i = 0; i < LatencyPredictor::kMinSamples - 1; ++i) predictor.LearnWait(i, 0.1 * i);
  EXPECT_EQ(predictor.PredictWait(3), std::nullopt);
  predictor.LearnWait(2, 0.2);
  ASSERT_TRUE(predictor.PredictWait(3).has_value());
  // 100 ms per request ahead.
  EXPECT_NEAR(*predictor.PredictWait(3), 0.3, 0.01);
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
