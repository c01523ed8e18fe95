// PipelineCore with 10,000 requests in flight: one Abort of all of them, the
// death of a replica holding a quarter of them, and a drain that must abort them
// all. Each keeps its semantics at scale (one worker call per replica, exactly one
// terminal per request, no binding left) in linear time; the event-loop time these
// take is measured by //tests/bench:abort_benchmark.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "orchestrator/core/pipeline_core.h"
#include "orchestrator/core/testing/pipeline_core_harness.h"

namespace omnistage {
namespace pipeline_core_test {
namespace {

constexpr int kRequests = 10000;
constexpr int kThinkers = 4;

class PipelineCoreScaleTest : public PipelineCoreTest {
 protected:
  // `count` requests, round robin over the thinkers; every one has also
  // started on the talker, so aborts and failures reach two stages.
  void StartMany(int count = kRequests) {
    PipelineConfig config = OmniConfig(Shape().Thinkers(kThinkers).Talkers(2));
    config.max_in_flight = 2 * count;
    // Thousands bound to each thinker at once: every request is sent as it
    // comes (the admission queue would hold all but a batch per replica).
    config.max_queued = 0;
    Build(config);
    sinks.clear();
    for (int i = 0; i < count; ++i) {
      const std::string id = absl::StrCat("r", i);
      sinks.push_back(Gen(id, {v1::MODALITY_AUDIO}));
      Out(0, i % kThinkers, id, {Text("x")});
    }
    ASSERT_EQ(core().in_flight(), static_cast<size_t>(count));
    ClearLog();
  }
  std::vector<std::shared_ptr<FakeResponseSink>> sinks;
};

TEST_F(PipelineCoreScaleTest, TenThousandIdsInOneAbortMakeOneCallPerReplicaPerStage) {
  StartMany();
  std::vector<std::string> ids;
  // The most one call may carry: every request in flight.
  for (int i = kRequests - 1; i >= 0; --i) ids.push_back(absl::StrCat("r", i));
  absl::StatusOr<v1::AbortResponse> result = AbortNow(ids);
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(result->results_size(), kRequests);
  for (int i = 0; i < kRequests; ++i) {
    ASSERT_EQ(result->results(i).request_id(), ids[i]) << "results out of request order";
    ASSERT_EQ(result->results(i).outcome(), v1::AbortResult::OUTCOME_ABORTED) << i;
    ASSERT_EQ(sinks[i]->terminal().finish_reason(), v1::FINISH_REASON_ABORT) << i;
  }
  // Four thinkers and two talkers: six calls, each carrying its share.
  ASSERT_EQ(LogWith(".abort").size(), 6u);
  for (int r = 0; r < kThinkers; ++r) {
    ASSERT_EQ(fake(0, r).aborts().size(), 1u);
    EXPECT_EQ(fake(0, r).aborts()[0].size(), static_cast<size_t>(kRequests / kThinkers));
  }
  EXPECT_EQ(fake(1, 0).aborts()[0].size() + fake(1, 1).aborts()[0].size(),
            static_cast<size_t>(kRequests));
}

TEST_F(PipelineCoreScaleTest, ReplicaHoldingThousandsDiesAndFailsOnlyThose) {
  StartMany();
  core().OnReplicaDown(0, 1, absl::UnavailableError("connection reset"));
  int failed = 0;
  for (int i = 0; i < kRequests; ++i) {
    if (i % kThinkers == 1) {
      ASSERT_EQ(sinks[i]->terminal().finish_reason(), v1::FINISH_REASON_ERROR) << i;
      ++failed;
    } else {
      ASSERT_EQ(sinks[i]->end_count(), 0) << i;
    }
  }
  EXPECT_EQ(failed, kRequests / kThinkers);
  // Their talker work is stopped with one call: they all sit on talker 1.
  ASSERT_EQ(LogWith(".abort").size(), 1u);
  EXPECT_EQ(fake(1, 1).aborts()[0].size(), static_cast<size_t>(failed));
  EXPECT_EQ(core().in_flight(), static_cast<size_t>(kRequests - failed));
  EXPECT_EQ(core().pool(1).bindings(), static_cast<size_t>(kRequests - failed));
  // End the rest for the invariant check.
  std::vector<std::string> rest;
  for (int i = 0; i < kRequests; ++i) {
    if (i % kThinkers != 1) rest.push_back(absl::StrCat("r", i));
  }
  ASSERT_TRUE(AbortNow(rest).ok());
}

TEST_F(PipelineCoreScaleTest, OneIdMoreThanACallMayCarryIsRefusedWhole) {
  StartMany();
  std::vector<std::string> ids;
  for (int i = 0; i <= kRequests; ++i) ids.push_back(absl::StrCat("r", i));
  absl::StatusOr<v1::AbortResponse> result = AbortNow(ids);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(result.status().message(), "request_ids: 10001 ids; the limit is 10000");
  EXPECT_EQ(LogWith(".abort").size(), 0u);
  EXPECT_EQ(core().in_flight(), static_cast<size_t>(kRequests));
  // The most a call may carry goes through, and ends them for the invariant check.
  ids.pop_back();
  ASSERT_TRUE(AbortNow(ids).ok());
}

// A drain is not a client: it aborts everything in flight, however many, with
// one call per replica per stage.
TEST_F(PipelineCoreScaleTest, DrainDeadlineAbortsMoreThanAClientCallMayCarry) {
  StartMany(kRequests + 2000);
  int drained = 0;
  core().Drain(scheduler_.Now() + absl::Seconds(1), [&] { ++drained; });
  scheduler_.AdvanceBy(absl::Seconds(1));
  EXPECT_EQ(drained, 1);
  EXPECT_EQ(LogWith(".abort").size(), 6u);
  for (const auto& sink : sinks) {
    ASSERT_EQ(sink->terminal().finish_reason(), v1::FINISH_REASON_ABORT);
  }
}

}  // namespace
}  // namespace pipeline_core_test
}  // namespace omnistage
