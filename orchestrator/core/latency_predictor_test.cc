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

// Before a wait with an estimate was learned, the estimate itself answers.
TEST(LatencyPredictorTest, AnEstimateAnswersBeforeItsBiasIsKnown) {
  LatencyPredictor predictor;
  ASSERT_TRUE(predictor.PredictWait(2, 0.25).has_value());
  EXPECT_DOUBLE_EQ(*predictor.PredictWait(2, 0.25), 0.25);
  // Waits learned without one teach only the model by the requests ahead.
  for (int i = 0; i < 4; ++i) predictor.LearnWait(1, -1, 0.4);
  EXPECT_DOUBLE_EQ(*predictor.PredictWait(1, 0.1), 0.1);
  EXPECT_NEAR(*predictor.PredictWait(1, -1), 0.4, 0.001);
}

// Heavy load: estimates near 200 ms, the waits 30 ms longer, with noise a
// line through them turns into a flat slope.
void LearnHeavyLoad(LatencyPredictor* predictor) {
  for (int i = 0; i < 20; ++i) {
    predictor->LearnWait(3, 0.2 + 0.005 * (i % 3), 0.23 + 0.01 * (i % 2));
  }
}

// A correction answers only among the estimates it learned from: a line
// through a narrow range strays far outside it.
TEST(LatencyPredictorTest, ACorrectionAnswersOnlyWhereItLearned) {
  LatencyPredictor predictor;
  LearnHeavyLoad(&predictor);
  EXPECT_NEAR(*predictor.PredictWait(3, 0.2), 0.235, 0.005);
  // Light load: a short estimate is taken as it is.
  EXPECT_DOUBLE_EQ(*predictor.PredictWait(0, 0.01), 0.01);
}

// When the estimates' bias goes away, the estimate as it is answers again
// as soon as it was nearer the waits than its correction.
TEST(LatencyPredictorTest, ACorrectionThatMissesGivesWayToTheEstimate) {
  LatencyPredictor predictor;
  LearnHeavyLoad(&predictor);
  for (int i = 0; i < 5; ++i) predictor.LearnWait(3, 0.205, 0.205);
  EXPECT_DOUBLE_EQ(*predictor.PredictWait(3, 0.205), 0.205);
}

// A lead learns what the time left in the engine's current step adds.
TEST(LatencyPredictorTest, ALeadLearnsTheRestOfTheCurrentStep) {
  LatencyPredictor predictor;
  for (double until : {0.003, 0.017, 0.009, 0.012, 0.0, 0.019}) {
    LeadFeatures features{1, 0.1};
    features.until_step = until;
    predictor.LearnLead(0, 0, Lead::kFirstOutput, features, 0.020 + until);
  }
  LeadFeatures now{1, 0.1};
  now.until_step = 0.005;
  EXPECT_NEAR(*predictor.PredictLead(0, 0, Lead::kFirstOutput, now), 0.025, 0.001);
  now.until_step = 0.015;
  EXPECT_NEAR(*predictor.PredictLead(0, 0, Lead::kFirstOutput, now), 0.035, 0.001);
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

// A first-output model that learned only a full replica does not answer for
// an idle one: the steps do (a request that finds the engine idle has its
// first output one step later), until it has learned that load too.
TEST(LatencyPredictorTest, TheStepsAnswerWhereTheLoadIsNewToTheModel) {
  LatencyPredictor predictor;
  for (double until : {0.003, 0.017, 0.009, 0.012}) {
    LeadFeatures full{3, 0.1, until, 0.020};
    predictor.LearnLead(0, 0, Lead::kFirstOutput, full, 0.020 + until);
    predictor.LearnLead(0, 0, Lead::kDone, full, 0.2);
  }
  LeadFeatures idle{0, 0.1, 0, 0.020};
  EXPECT_DOUBLE_EQ(*predictor.PredictLead(0, 0, Lead::kFirstOutput, idle), 0.020);
  LeadFeatures two{2, 0.1, 0.005, 0.020};
  EXPECT_DOUBLE_EQ(*predictor.PredictLead(0, 0, Lead::kFirstOutput, two), 0.025);
  // Without a step period, or for a stage's end, the model answers.
  LeadFeatures unknown_steps{0, 0.1, 0, 0};
  EXPECT_TRUE(predictor.PredictLead(0, 0, Lead::kFirstOutput, unknown_steps).has_value());
  EXPECT_NEAR(*predictor.PredictLead(0, 0, Lead::kDone, idle), 0.2, 0.01);
  // Once the idle replica's first outputs were learned, the model answers
  // for it (this one took longer than a step).
  for (int i = 0; i < 3; ++i) predictor.LearnLead(0, 0, Lead::kFirstOutput, idle, 0.030);
  EXPECT_NEAR(*predictor.PredictLead(0, 0, Lead::kFirstOutput, idle), 0.030, 0.001);
}

// With the step period known, a first output is what the steps say plus
// what the model learned comes beyond them (here 4 ms, at every phase).
TEST(LatencyPredictorTest, AFirstOutputIsTheStepsAndWhatComesBeyondThem) {
  LatencyPredictor predictor;
  int i = 0;
  for (double until : {0.003, 0.017, 0.009, 0.012, 0.0, 0.019}) {
    LeadFeatures features{static_cast<double>(1 + i++ % 3), 0.1, until, 0.020};
    predictor.LearnLead(0, 0, Lead::kFirstOutput, features, until + 0.020 + 0.004);
  }
  LeadFeatures now{2, 0.1, 0.015, 0.020};
  EXPECT_NEAR(*predictor.PredictLead(0, 0, Lead::kFirstOutput, now), 0.039, 0.0005);
  // A step period that changed since (a slower engine) moves the
  // prediction with it.
  now.step_period = 0.030;
  EXPECT_NEAR(*predictor.PredictLead(0, 0, Lead::kFirstOutput, now), 0.049, 0.0005);
}

}  // namespace
}  // namespace omnistage
