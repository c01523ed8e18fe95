// The orchestrator's metrics after known workloads, on PipelineCore over fakes
// and a manual clock: requests by finish reason, refusals by code, time to the
// first text and audio, end-to-end and per-stage time, evictions by reason and
// the replica's up gauge, one worker abort call per replica, client
// cancellations, and the in-flight and bound gauges of a scrape snapshot.
#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "orchestrator/core/testing/pipeline_core_harness.h"

namespace omnistage {
namespace pipeline_core_test {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class PipelineCoreMetricsTest : public PipelineCoreTest {
 protected:
  std::string Scrape() {
    core().SnapshotMetrics();
    return core().metrics_registry().Render();
  }

  // One omni request through every stage: text after 10 ms, audio 20 ms later,
  // done 5 ms after that.
  void RunOne(const std::string& id) {
    Gen(id);
    scheduler_.AdvanceBy(absl::Milliseconds(10));
    Out(0, 0, id, {Text("Hello")});
    Done(0, 0, id);
    Out(1, 0, id, {Codes({1, 2})});
    Done(1, 0, id);
    scheduler_.AdvanceBy(absl::Milliseconds(20));
    Out(2, 0, id, {Audio("ab")});
    scheduler_.AdvanceBy(absl::Milliseconds(5));
    Done(2, 0, id);
  }
};

TEST_F(PipelineCoreMetricsTest, TenRequestsAreCountedWithTheirTimes) {
  Build();
  for (int i = 0; i < 10; ++i) RunOne(absl::StrCat("r", i));
  const std::string text = Scrape();
  EXPECT_THAT(text, HasSubstr("omnistage_requests_total{finish_reason=\"stop\"} 10\n"));
  // First text at 10 ms: in the 10 ms bucket, not in the 5 ms one.
  EXPECT_THAT(text, HasSubstr("omnistage_time_to_first_output_seconds_bucket{modality=\"text\","
                              "le=\"0.005\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("omnistage_time_to_first_output_seconds_bucket{modality=\"text\","
                              "le=\"0.01\"} 10\n"));
  // First audio at 30 ms.
  EXPECT_THAT(text, HasSubstr("omnistage_time_to_first_output_seconds_bucket{modality=\"audio\","
                              "le=\"0.025\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("omnistage_time_to_first_output_seconds_bucket{modality=\"audio\","
                              "le=\"0.05\"} 10\n"));
  // End to end 35 ms.
  EXPECT_THAT(text, HasSubstr("omnistage_request_duration_seconds_bucket{le=\"0.025\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("omnistage_request_duration_seconds_bucket{le=\"0.05\"} 10\n"));
  EXPECT_THAT(text, HasSubstr("omnistage_request_duration_seconds_count 10\n"));
  // The vocoder ran from its first input (10 ms) to its last output (35 ms).
  EXPECT_THAT(text, HasSubstr("omnistage_stage_duration_seconds_bucket{stage=\"vocoder\","
                              "le=\"0.01\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("omnistage_stage_duration_seconds_bucket{stage=\"vocoder\","
                              "le=\"0.025\"} 10\n"));
  EXPECT_THAT(text, HasSubstr("omnistage_stage_duration_seconds_count{stage=\"thinker\"} 10\n"));
  // The client gets two responses (text, then audio; codes stay inside): one gap each.
  EXPECT_THAT(text, HasSubstr("omnistage_time_between_outputs_seconds_count 10\n"));
  EXPECT_THAT(text, HasSubstr("omnistage_in_flight_requests 0\n"));
}

TEST_F(PipelineCoreMetricsTest, RefusalsAreCountedByCode) {
  Build();
  Gen("dup");
  Gen("dup");  // ALREADY_EXISTS
  v1::GenerateRequest too_long;
  too_long.set_request_id("long");
  too_long.set_prompt(std::string(100, 'x'));  // over max_prompt_bytes (32)
  Gen(too_long);
  const std::string text = Scrape();
  EXPECT_THAT(text, HasSubstr("omnistage_request_refusals_total{code=\"ALREADY_EXISTS\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("omnistage_request_refusals_total{code=\"INVALID_ARGUMENT\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("omnistage_in_flight_requests 1\n"));
  EXPECT_THAT(text, HasSubstr("omnistage_bound_requests{stage=\"thinker\",replica=\"0\"} 1\n"));
  Done(0, 0, "dup");
  Done(1, 0, "dup");
  Done(2, 0, "dup");
}

TEST_F(PipelineCoreMetricsTest, AKilledReplicaIsOneEvictionAndDown) {
  Build(Shape().Talkers(2));
  EXPECT_THAT(Scrape(), HasSubstr("omnistage_replica_up{stage=\"talker\",replica=\"1\"} 1\n"));
  core().OnReplicaDown(1, 1, absl::UnavailableError("worker exited"));
  // Its reconnect attempts failing again are not more evictions.
  core().OnReplicaDown(1, 1, absl::UnavailableError("connection refused"));
  const std::string text = Scrape();
  EXPECT_THAT(text, HasSubstr("omnistage_replica_evictions_total{stage=\"talker\","
                              "reason=\"stream_ended\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("omnistage_replica_up{stage=\"talker\",replica=\"1\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("omnistage_replica_up{stage=\"talker\",replica=\"0\"} 1\n"));
}

TEST_F(PipelineCoreMetricsTest, AnAbortIsOneWorkerCallPerReplicaAndItsDurationIsKept) {
  Build(Shape().Talkers(2));
  Gen("a");
  Out(0, 0, "a", {Text("x")});  // a: T0, K0 (streaming input), W0 not yet
  // The thinker's worker had finished it when the abort came; the talker's
  // still ran it.
  fake(0, 0).set_ended_before_abort({"a"});
  ASSERT_TRUE(AbortNow({"a"}).ok());
  const std::string text = Scrape();
  EXPECT_THAT(text, HasSubstr("omnistage_worker_abort_calls_total{stage=\"thinker\","
                              "replica=\"0\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("omnistage_worker_abort_calls_total{stage=\"talker\","
                              "replica=\"0\"} 1\n"));
  EXPECT_THAT(text, Not(HasSubstr("omnistage_worker_abort_calls_total{stage=\"talker\","
                                  "replica=\"1\"}")));
  EXPECT_THAT(text, Not(HasSubstr("omnistage_worker_abort_calls_total{stage=\"vocoder\"")));
  EXPECT_THAT(text, HasSubstr("omnistage_abort_duration_seconds_count 1\n"));
  EXPECT_THAT(text, HasSubstr("omnistage_requests_total{finish_reason=\"abort\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("omnistage_worker_abort_ids_total{stage=\"talker\","
                              "outcome=\"stopped\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("omnistage_worker_abort_ids_total{stage=\"thinker\","
                              "outcome=\"already_ended\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("omnistage_worker_abort_ids_total{stage=\"thinker\","
                              "outcome=\"stopped\"} 0\n"));
}

TEST_F(PipelineCoreMetricsTest, AClientThatGoesAwayIsOneCancellation) {
  Build();
  std::shared_ptr<FakeResponseSink> sink = Gen("c");
  core().Cancel("c", sink.get());
  // A cancellation naming another call, or a request no longer in flight, is none.
  core().Cancel("c", sink.get());
  auto other = std::make_shared<FakeResponseSink>();
  core().Cancel("c", other.get());
  EXPECT_THAT(Scrape(), HasSubstr("omnistage_client_cancellations_total 1\n"));
}

// A scrape renders while the loop takes the next snapshot: it sees every live
// replica, never a set half rebuilt.
TEST_F(PipelineCoreMetricsTest, AScrapeDuringASnapshotSeesEveryReplica) {
  Build(Shape().Thinkers(2).Talkers(3).Vocoders(2));
  core().SnapshotMetrics();
  // Snapshots on the loop (this thread), scrapes on another, as in the server.
  std::atomic<bool> done{false};
  std::atomic<int> missing{0};
  std::thread scraper([&] {
    for (int i = 0; i < 3000 && missing.load() == 0; ++i) {
      const std::string text = core().metrics_registry().Render();
      for (const char* series : {"omnistage_replica_up{stage=\"thinker\",replica=\"1\"} 1\n",
                                 "omnistage_replica_up{stage=\"talker\",replica=\"2\"} 1\n",
                                 "omnistage_bound_requests{stage=\"vocoder\",replica=\"1\"} 0\n"}) {
        if (!absl::StrContains(text, series)) {
          missing.fetch_add(1);
          ADD_FAILURE() << "render " << i << " lacks " << series;
        }
      }
    }
    done.store(true);
  });
  while (!done.load()) core().SnapshotMetrics();
  scraper.join();
  EXPECT_EQ(missing.load(), 0);
}

// Counters whose labels are known are there, at 0, from the first scrape.
TEST_F(PipelineCoreMetricsTest, KnownLabelsStartAtZero) {
  Build();
  const std::string text = core().metrics_registry().Render();
  for (const char* series : {
           "omnistage_requests_total{finish_reason=\"stop\"} 0\n",
           "omnistage_requests_total{finish_reason=\"length\"} 0\n",
           "omnistage_requests_total{finish_reason=\"abort\"} 0\n",
           "omnistage_requests_total{finish_reason=\"error\"} 0\n",
           "omnistage_request_refusals_total{code=\"RESOURCE_EXHAUSTED\"} 0\n",
           "omnistage_request_refusals_total{code=\"UNAVAILABLE\"} 0\n",
           "omnistage_auth_refusals_total{call=\"Abort\",code=\"PERMISSION_DENIED\"} 0\n",
           "omnistage_replica_evictions_total{stage=\"talker\",reason=\"stalled\"} 0\n",
           "omnistage_replica_evictions_total{stage=\"vocoder\",reason=\"send_failed\"} 0\n",
           "omnistage_invariant_violations_total 0\n",
       }) {
    EXPECT_THAT(text, HasSubstr(series));
  }
}

TEST_F(PipelineCoreMetricsTest, TheLoopLagObserverFeedsItsHistogram) {
  Build();
  core().metrics().LoopLag(absl::Microseconds(3));
  EXPECT_THAT(Scrape(), HasSubstr("omnistage_event_loop_lag_seconds_bucket{le=\"5e-06\"} 1\n"));
}

}  // namespace
}  // namespace pipeline_core_test
}  // namespace omnistage
