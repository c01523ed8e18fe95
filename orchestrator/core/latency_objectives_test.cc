#include "orchestrator/core/latency_objectives.h"

#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace omnistage {
namespace {

v1::LatencyObjectives Objectives(uint32_t first_output_ms, uint32_t first_audio_ms) {
  v1::LatencyObjectives objectives;
  objectives.set_first_output_ms(first_output_ms);
  objectives.set_first_audio_ms(first_audio_ms);
  return objectives;
}

TEST(LatencyObjectivesTest, TheDeadlineIsTheEarliestObjective) {
  const absl::Time admitted = absl::FromUnixSeconds(1000);
  EXPECT_EQ(ObjectiveDeadline(Objectives(0, 0), true, admitted), absl::InfiniteFuture());
  EXPECT_EQ(ObjectiveDeadline(Objectives(500, 0), true, admitted),
            admitted + absl::Milliseconds(500));
  EXPECT_EQ(ObjectiveDeadline(Objectives(500, 300), true, admitted),
            admitted + absl::Milliseconds(300));
  EXPECT_EQ(ObjectiveDeadline(Objectives(500, 800), true, admitted),
            admitted + absl::Milliseconds(500));
  // The first audio's counts only for a request that gets audio.
  EXPECT_EQ(ObjectiveDeadline(Objectives(0, 300), false, admitted), absl::InfiniteFuture());
}

// What a request leaves unset comes from its identity, then its pipeline;
// the first audio's only when it gets audio.
TEST(LatencyObjectivesTest, UnsetObjectivesTakeTheIdentitysThenThePipelines) {
  const ObjectiveDefaults identity{/*first_output_ms=*/400, /*first_audio_ms=*/0};
  const ObjectiveDefaults pipeline{/*first_output_ms=*/900, /*first_audio_ms=*/1200};
  v1::LatencyObjectives merged = WithDefaults(Objectives(0, 0), identity, pipeline, true);
  EXPECT_EQ(merged.first_output_ms(), 400u);
  EXPECT_EQ(merged.first_audio_ms(), 1200u);
  merged = WithDefaults(Objectives(100, 300), identity, pipeline, true);
  EXPECT_EQ(merged.first_output_ms(), 100u);
  EXPECT_EQ(merged.first_audio_ms(), 300u);
  merged = WithDefaults(Objectives(0, 0), ObjectiveDefaults(), pipeline, false);
  EXPECT_EQ(merged.first_output_ms(), 900u);
  EXPECT_EQ(merged.first_audio_ms(), 0u);
}

TEST(LatencyObjectivesTest, CriticalityAndGapsTakeDefaultsToo) {
  ObjectiveDefaults identity;
  identity.criticality = v1::CRITICALITY_SHEDDABLE;
  ObjectiveDefaults pipeline;
  pipeline.between_outputs_ms = 50;
  pipeline.criticality = v1::CRITICALITY_CRITICAL;
  v1::LatencyObjectives merged = WithDefaults(Objectives(0, 0), identity, pipeline, false);
  EXPECT_EQ(merged.criticality(), v1::CRITICALITY_SHEDDABLE);
  EXPECT_EQ(merged.between_outputs_ms(), 50u);
  merged = WithDefaults(Objectives(0, 0), ObjectiveDefaults(), pipeline, false);
  EXPECT_EQ(merged.criticality(), v1::CRITICALITY_CRITICAL);
  v1::LatencyObjectives asked = Objectives(0, 0);
  asked.set_criticality(v1::CRITICALITY_STANDARD);
  asked.set_between_outputs_ms(20);
  merged = WithDefaults(asked, identity, pipeline, false);
  EXPECT_EQ(merged.criticality(), v1::CRITICALITY_STANDARD);
  EXPECT_EQ(merged.between_outputs_ms(), 20u);
  // None anywhere: standard.
  merged = WithDefaults(Objectives(0, 0), ObjectiveDefaults(), ObjectiveDefaults(), false);
  EXPECT_EQ(merged.criticality(), v1::CRITICALITY_STANDARD);
}

TEST(LatencyObjectivesTest, JudgesEachObjectiveByItsFirstOutput) {
  EXPECT_EQ(JudgeObjective(0, 0.1, 1), v1::OBJECTIVE_OUTCOME_NONE);
  EXPECT_EQ(JudgeObjective(200, 0.2, 1), v1::OBJECTIVE_OUTCOME_MET);
  EXPECT_EQ(JudgeObjective(200, 0.201, 1), v1::OBJECTIVE_OUTCOME_MISSED);
  // Nothing came: missed once it outlived the deadline, else not judged.
  EXPECT_EQ(JudgeObjective(200, -1, 0.5), v1::OBJECTIVE_OUTCOME_MISSED);
  EXPECT_EQ(JudgeObjective(200, -1, 0.1), v1::OBJECTIVE_OUTCOME_NONE);
}

TEST(LatencyObjectivesTest, FillsTheRecord) {
  v1::FinishedRequest record;
  record.set_first_output_seconds(0.05);
  record.set_first_audio_seconds(0.4);
  record.set_duration_seconds(2);
  JudgeObjectives(Objectives(100, 300), &record);
  EXPECT_EQ(record.first_output_objective(), v1::OBJECTIVE_OUTCOME_MET);
  EXPECT_EQ(record.first_audio_objective(), v1::OBJECTIVE_OUTCOME_MISSED);
  EXPECT_EQ(record.between_outputs_objective(), v1::OBJECTIVE_OUTCOME_NONE);
}

TEST(LatencyObjectivesTest, JudgesTheMeanTimeBetweenOutputs) {
  v1::LatencyObjectives objectives = Objectives(0, 0);
  objectives.set_between_outputs_ms(40);
  objectives.set_criticality(v1::CRITICALITY_SHEDDABLE);
  v1::FinishedRequest record;
  record.set_first_output_seconds(0.05);
  record.set_duration_seconds(2);
  // One output: no gap to judge.
  JudgeObjectives(objectives, &record);
  EXPECT_EQ(record.between_outputs_objective(), v1::OBJECTIVE_OUTCOME_NONE);
  EXPECT_EQ(record.criticality(), v1::CRITICALITY_SHEDDABLE);
  record.set_between_outputs_seconds(0.04);
  JudgeObjectives(objectives, &record);
  EXPECT_EQ(record.between_outputs_objective(), v1::OBJECTIVE_OUTCOME_MET);
  record.set_between_outputs_seconds(0.041);
  JudgeObjectives(objectives, &record);
  EXPECT_EQ(record.between_outputs_objective(), v1::OBJECTIVE_OUTCOME_MISSED);
}

}  // namespace
}  // namespace omnistage
