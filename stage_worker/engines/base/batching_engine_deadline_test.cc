// BatchingEngine by playback deadline: who gets a free slot first, and who
// sits out a step (playback_lead_ms).
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
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
using ::testing::UnorderedElementsAre;

BatchingOptions Options(int batch_size, absl::Duration lead = absl::ZeroDuration()) {
  BatchingOptions options;
  options.batch_size = batch_size;
  options.playback_lead = lead;
  return options;
}

std::vector<std::string> Ids(const std::vector<v1::RequestOutput>& outputs) {
  std::vector<std::string> ids;
  for (const auto& output : outputs) ids.push_back(output.request_id());
  return ids;
}

double Stat(EchoEngine& engine, const std::string& name) {
  absl::StatusOr<google::protobuf::Value> stats = engine.Utility("stats", {});
  EXPECT_TRUE(stats.ok());
  return stats->struct_value().fields().at(name).number_value();
}

TEST(BatchingOptionsDeadlineTest, ReadsThePlaybackLead) {
  EngineParams params("echo", {{"playback_lead_ms", "1500"}});
  EXPECT_EQ(BatchingOptions::Read(&params).playback_lead, absl::Milliseconds(1500));
  EXPECT_TRUE(params.Finish().ok());
  EngineParams absent("echo", {});
  EXPECT_EQ(BatchingOptions::Read(&absent).playback_lead, absl::ZeroDuration());
  EngineParams negative("echo", {{"playback_lead_ms", "-1"}});
  BatchingOptions::Read(&negative);
  EXPECT_FALSE(negative.Finish().ok());
}

// One slot: of the requests waiting, the one whose listener runs out soonest
// goes first, and one that is not playing yet before any that is.
TEST(BatchingEngineDeadlineTest, AFreeSlotGoesToTheSoonestDeadline) {
  EchoEngine engine(Options(/*batch_size=*/1));
  ASSERT_TRUE(engine.Add(MakeRequest("first", {TextPayload("x")})).ok());
  ASSERT_TRUE(engine.Add(MakeRequest("ahead", {TextPayload("x")})).ok());
  ASSERT_TRUE(engine.Add(MakeRequest("behind", {TextPayload("x")})).ok());
  ASSERT_TRUE(engine.Add(MakeRequest("silent", {TextPayload("x")})).ok());
  const absl::Time now = absl::Now();
  engine.SetPlaybackDeadline("ahead", now + absl::Seconds(10));
  engine.SetPlaybackDeadline("behind", now + absl::Seconds(1));
  engine.SetPlaybackDeadline("nobody", now);  // unknown: ignored

  EXPECT_THAT(Ids(MustStep(&engine)), ElementsAre("first"));
  EXPECT_THAT(Ids(MustStep(&engine)), ElementsAre("silent"));
  EXPECT_THAT(Ids(MustStep(&engine)), ElementsAre("behind"));
  EXPECT_THAT(Ids(MustStep(&engine)), ElementsAre("ahead"));
  EXPECT_FALSE(engine.HasWork());
}

// Without deadlines, FIFO as ever.
TEST(BatchingEngineDeadlineTest, WithoutDeadlinesSlotsGoInArrivalOrder) {
  EchoEngine engine(Options(/*batch_size=*/1));
  for (const char* id : {"a", "b", "c"}) {
    ASSERT_TRUE(engine.Add(MakeRequest(id, {TextPayload("x")})).ok());
  }
  EXPECT_THAT(Ids(MustStep(&engine)), ElementsAre("a"));
  EXPECT_THAT(Ids(MustStep(&engine)), ElementsAre("b"));
  EXPECT_THAT(Ids(MustStep(&engine)), ElementsAre("c"));
}

// A request far ahead of its listener sits out while one that is not
// playing is ready; once nothing close is ready, it steps again, and it
// produces what it would have (only the timing moved).
TEST(BatchingEngineDeadlineTest, ARequestAheadSitsOutWhileAnotherIsClose) {
  EchoEngine engine(Options(/*batch_size=*/4, absl::Seconds(2)));
  ASSERT_TRUE(engine.Add(MakeRequest("ahead", {TextPayload("abc")})).ok());
  ASSERT_TRUE(engine.Add(MakeRequest("new", {TextPayload("xy")})).ok());
  engine.SetPlaybackDeadline("ahead", absl::Now() + absl::Seconds(60));

  std::string ahead_text;
  std::vector<v1::RequestOutput> step = MustStep(&engine);
  EXPECT_THAT(Ids(step), ElementsAre("new"));
  step = MustStep(&engine);
  EXPECT_THAT(Ids(step), ElementsAre("new"));  // finishes
  EXPECT_EQ(Stat(engine, "sat_out"), 2);
  // Nobody close: the one ahead steps to its end.
  while (engine.HasWork()) {
    for (const v1::RequestOutput& output : MustStep(&engine)) {
      EXPECT_EQ(output.request_id(), "ahead");
      for (const v1::Payload& p : output.payloads()) ahead_text += p.text().text();
    }
  }
  EXPECT_EQ(ahead_text, "abc");
  EXPECT_EQ(Stat(engine, "sat_out"), 2);
}

// Within the lead, a request steps with the others.
TEST(BatchingEngineDeadlineTest, ARequestWithinTheLeadSteps) {
  EchoEngine engine(Options(/*batch_size=*/4, absl::Seconds(2)));
  ASSERT_TRUE(engine.Add(MakeRequest("close", {TextPayload("ab")})).ok());
  ASSERT_TRUE(engine.Add(MakeRequest("new", {TextPayload("xy")})).ok());
  engine.SetPlaybackDeadline("close", absl::Now() + absl::Seconds(1));
  EXPECT_THAT(Ids(MustStep(&engine)), UnorderedElementsAre("close", "new"));
  EXPECT_EQ(Stat(engine, "sat_out"), 0);
}

// Without playback_lead_ms nobody sits out, whatever the deadlines.
TEST(BatchingEngineDeadlineTest, WithoutALeadEveryReadyRequestSteps) {
  EchoEngine engine(Options(/*batch_size=*/4));
  ASSERT_TRUE(engine.Add(MakeRequest("ahead", {TextPayload("ab")})).ok());
  ASSERT_TRUE(engine.Add(MakeRequest("new", {TextPayload("xy")})).ok());
  engine.SetPlaybackDeadline("ahead", absl::Now() + absl::Seconds(60));
  EXPECT_THAT(Ids(MustStep(&engine)), UnorderedElementsAre("ahead", "new"));
  EXPECT_EQ(Stat(engine, "sat_out"), 0);
}

}  // namespace
}  // namespace omnistage
