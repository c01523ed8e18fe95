// BatchingEngine's later pieces sized by load (later_piece_steps): a request
// whose first output is out and whose input still streams steps only every
// so many steps, more apart the fuller the batch, and produces what it would
// have.
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "stage_worker/engines/base/batching_engine.h"
#include "stage_worker/engines/base/engine_params.h"
#include "stage_worker/engines/testing/engine_harness.h"

namespace omnistage {
namespace {

using engine_testing::EchoEngine;
using engine_testing::MakeRequest;
using engine_testing::MustStep;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

BatchingOptions Options(int batch_size, int later_piece_steps) {
  BatchingOptions options;
  options.batch_size = batch_size;
  options.later_piece_steps = later_piece_steps;
  return options;
}

double Stat(EchoEngine& engine, const std::string& name) {
  absl::StatusOr<google::protobuf::Value> stats = engine.Utility("stats", {});
  EXPECT_TRUE(stats.ok());
  return stats->struct_value().fields().at(name).number_value();
}

// The steps (1-based) in which `id` produced output over `steps` steps, its
// input streaming one byte before each step.
std::vector<int> OutputSteps(EchoEngine* engine, const std::string& id, int steps) {
  std::vector<int> at;
  for (int step = 1; step <= steps; ++step) {
    EXPECT_TRUE(engine->AppendInput(id, {TextPayload("x")}, /*last=*/false).ok());
    for (const v1::RequestOutput& output : MustStep(engine)) {
      if (output.request_id() == id && output.payloads_size() > 0) at.push_back(step);
    }
  }
  return at;
}

TEST(BatchingOptionsPieceTest, ReadsLaterPieceSteps) {
  EngineParams params("echo", {{"later_piece_steps", "4"}});
  EXPECT_EQ(BatchingOptions::Read(&params).later_piece_steps, 4);
  EXPECT_TRUE(params.Finish().ok());
  EngineParams absent("echo", {});
  EXPECT_EQ(BatchingOptions::Read(&absent).later_piece_steps, 1);
  EngineParams zero("echo", {{"later_piece_steps", "0"}});
  BatchingOptions::Read(&zero);
  EXPECT_FALSE(zero.Finish().ok());
}

// A full batch of one: after its first piece the request steps every 4th
// step, each time with what gathered since.
TEST(BatchingEnginePieceTest, AtAFullBatchLaterPiecesComeThatManyStepsApart) {
  EchoEngine engine(Options(/*batch_size=*/1, /*later_piece_steps=*/4));
  ASSERT_TRUE(engine.Add(MakeRequest("r", {}, /*input_complete=*/false)).ok());
  EXPECT_THAT(OutputSteps(&engine, "r", 12), ElementsAre(1, 5, 9));
  EXPECT_EQ(Stat(engine, "piece_waits"), 9);
}

// Half the batch running: 1 + 3 x 1/2, rounded: every 3rd step (2.5 rounds
// away from zero).
TEST(BatchingEnginePieceTest, FewerRunningMeansPiecesCloserTogether) {
  EchoEngine engine(Options(/*batch_size=*/2, /*later_piece_steps=*/4));
  ASSERT_TRUE(engine.Add(MakeRequest("r", {}, /*input_complete=*/false)).ok());
  EXPECT_THAT(OutputSteps(&engine, "r", 10), ElementsAre(1, 4, 7, 10));
  EchoEngine light(Options(/*batch_size=*/64, /*later_piece_steps=*/4));
  ASSERT_TRUE(light.Add(MakeRequest("r", {}, /*input_complete=*/false)).ok());
  EXPECT_THAT(OutputSteps(&light, "r", 4), ElementsAre(1, 2, 3, 4));  // 1 + 3/64: every step.
}

// Once the input is complete the rest goes at once, and what it produced is
// what it would have.
TEST(BatchingEnginePieceTest, TheEndDoesNotWaitAndTheOutputIsTheSame) {
  EchoEngine engine(Options(/*batch_size=*/1, /*later_piece_steps=*/4));
  ASSERT_TRUE(engine.Add(MakeRequest("r", {TextPayload("ab")}, /*input_complete=*/false)).ok());
  std::string text;
  for (const v1::RequestOutput& output : MustStep(&engine))
    text += output.payloads(0).text().text();
  ASSERT_TRUE(engine.AppendInput("r", {TextPayload("cd")}, /*last=*/true).ok());
  int steps = 0;
  while (engine.HasWork()) {
    ++steps;
    for (const v1::RequestOutput& output : MustStep(&engine)) {
      for (const v1::Payload& p : output.payloads()) text += p.text().text();
    }
  }
  EXPECT_EQ(text, "abcd");
  EXPECT_EQ(steps, 3);  // b, c, d: one byte a step, none waited.
  EXPECT_EQ(Stat(engine, "piece_waits"), 0);
}

// A request's own later_piece_steps overrides the engine's; a bad one is
// refused at its field.
TEST(BatchingEnginePieceTest, ARequestSetsItsOwn) {
  EchoEngine engine(Options(/*batch_size=*/1, /*later_piece_steps=*/4));
  EngineRequest own = MakeRequest("r", {}, /*input_complete=*/false);
  (*own.params.mutable_extra())["later_piece_steps"] = "1";
  ASSERT_TRUE(engine.Add(std::move(own)).ok());
  EXPECT_THAT(OutputSteps(&engine, "r", 4), ElementsAre(1, 2, 3, 4));

  EngineRequest bad = MakeRequest("bad", {}, /*input_complete=*/false);
  (*bad.params.mutable_extra())["later_piece_steps"] = "0";
  const absl::Status refused = engine.Validate(bad);
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.message(), HasSubstr("later_piece_steps"));
}

}  // namespace
}  // namespace omnistage
