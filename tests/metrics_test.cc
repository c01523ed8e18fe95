// Both services' /metrics endpoints as real processes (draft -> llm x2, every
// process with --metrics_listen): the expositions pass promtool; after 10
// requests the orchestrator counts 10 and every worker stepped; an abort is one
// worker abort call per replica the request lived on; a killed replica is one
// eviction and `up` 0; and a real Prometheus server scraping all of them
// answers a PromQL query with the request count.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/testing/promtool.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/metrics_scrape.h"
#include "tests/pipeline_harness.h"
#include "tests/pipeline_test_util.h"
#include "tests/prometheus_server.h"

namespace omnistage {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

void ExpectPromtoolClean(const std::string& text, const std::string& who) {
  const PromtoolResult checked = PromtoolCheckMetrics(text);
  EXPECT_EQ(checked.exit_code, 0) << who << ": " << checked.output;
}

class MetricsProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    PipelineSpec spec = SimSpec();
    spec.orchestrator_flags = {"--metrics_listen=127.0.0.1:0"};
    for (StageSpec& stage : spec.stages) stage.worker_flags = {"--metrics_listen=127.0.0.1:0"};
    pipeline_ = StartPipeline(spec);
    ASSERT_NE(pipeline_, nullptr);
    ASSERT_GT(pipeline_->orchestrator_metrics_port(), 0);
  }

  std::vector<std::string> Targets() const {
    std::vector<std::string> targets = {
        absl::StrCat("127.0.0.1:", pipeline_->orchestrator_metrics_port())};
    for (int s = 0; s < 2; ++s) {
      for (int r = 0; r < pipeline_->replicas(s); ++r) {
        targets.push_back(absl::StrCat("127.0.0.1:", pipeline_->worker_metrics_port(s, r)));
      }
    }
    return targets;
  }

  std::unique_ptr<PipelineHarness> pipeline_;
};

TEST_F(MetricsProcessTest, TenRequestsAreCountedByBothServicesAndByPrometheus) {
  absl::StatusOr<std::unique_ptr<PrometheusServer>> prometheus =
      PrometheusServer::Start(Targets());
  ASSERT_TRUE(prometheus.ok()) << prometheus.status();

  std::vector<v1::GenerateRequest> requests;
  for (int i = 0; i < 10; ++i) {
    requests.push_back(MakeRequest(absl::StrCat("m", i), "count me",
                                   {StageParams(0, 8), StageParams(1, 16)}));
  }
  for (const GenerateResult& r : pipeline_->GenerateAll(requests)) {
    ExpectOneTerminal(r);
    ASSERT_EQ(r.terminal.finish_reason(), v1::FINISH_REASON_LENGTH) << r.Summary();
  }

  const std::string orchestrator = Scrape(pipeline_->orchestrator_metrics_port());
  ExpectPromtoolClean(orchestrator, "orchestrator");
  EXPECT_THAT(orchestrator, HasSubstr("omnistage_requests_total{finish_reason=\"length\"} 10\n"));
  EXPECT_THAT(orchestrator, HasSubstr("omnistage_request_duration_seconds_count 10\n"));
  EXPECT_THAT(orchestrator, HasSubstr("omnistage_time_to_first_output_seconds_count"
                                      "{modality=\"tokens\"} 10\n"));
  EXPECT_THAT(orchestrator, HasSubstr("omnistage_in_flight_requests 0\n"));
  EXPECT_THAT(orchestrator, HasSubstr("omnistage_replica_up{stage=\"llm\",replica=\"1\"} 1\n"));
  EXPECT_THAT(orchestrator, HasSubstr("omnistage_event_loop_lag_seconds_count"));
  EXPECT_THAT(orchestrator, HasSubstr("omnistage_heap_bytes{state=\"allocated\"} "));
  EXPECT_THAT(orchestrator, HasSubstr("omnistage_heap_bytes{state=\"cached\"} "));

  for (int s = 0; s < 2; ++s) {
    for (int r = 0; r < pipeline_->replicas(s); ++r) {
      const std::string worker = Scrape(pipeline_->worker_metrics_port(s, r));
      const std::string who = absl::StrCat("stage ", s, " replica ", r);
      ExpectPromtoolClean(worker, who);
      EXPECT_THAT(worker, HasSubstr("omnistage_worker_sessions 1\n")) << who;
      EXPECT_THAT(worker, HasSubstr("omnistage_worker_running_requests 0\n")) << who;
      EXPECT_THAT(worker, Not(HasSubstr("omnistage_worker_steps_total 0\n"))) << who;
      EXPECT_THAT(worker, HasSubstr("omnistage_heap_bytes{state=\"allocated\"} ")) << who;
    }
  }

  // Prometheus scraped all five processes and sums what they count.
  EXPECT_TRUE((*prometheus)
                  ->AwaitValue("sum(omnistage_requests_total)", 10, absl::Seconds(30))
                  .ok());
  EXPECT_TRUE((*prometheus)->AwaitValue("count(up == 1)", 4, absl::Seconds(30)).ok());
  EXPECT_TRUE((*prometheus)
                  ->AwaitValue("sum(omnistage_worker_sessions)", 3, absl::Seconds(30))
                  .ok());
}

TEST_F(MetricsProcessTest, AnAbortIsOneCallPerReplicaAndAKilledReplicaOneEviction) {
  std::unique_ptr<GenerateCall> call = pipeline_->StartGenerate(
      MakeRequest("long", "a long one", {StageParams(0, 5), StageParams(1, 100000)}));
  ASSERT_TRUE(call->WaitForOutput(absl::Seconds(30)));
  absl::StatusOr<v1::PipelineStatus> status = pipeline_->Status();
  ASSERT_TRUE(status.ok());
  // The draft finished; the request lives on one llm replica.
  int replica = -1;
  for (int r = 0; r < 2; ++r) {
    if (BoundRequests(*status, 1, r) == 1) replica = r;
  }
  ASSERT_GE(replica, 0);
  absl::StatusOr<v1::AbortResponse> aborted = pipeline_->Abort({"long"});
  ASSERT_TRUE(aborted.ok()) << aborted.status();
  call->Wait(absl::Seconds(10));
  std::string orchestrator = Scrape(pipeline_->orchestrator_metrics_port());
  EXPECT_THAT(orchestrator, HasSubstr(absl::StrCat(
                                "omnistage_worker_abort_calls_total{stage=\"llm\",replica=\"",
                                replica, "\"} 1\n")));
  EXPECT_THAT(orchestrator, Not(HasSubstr("omnistage_worker_abort_calls_total{stage=\"draft\"")));
  EXPECT_THAT(orchestrator, HasSubstr("omnistage_requests_total{finish_reason=\"abort\"} 1\n"));
  EXPECT_THAT(orchestrator, HasSubstr("omnistage_abort_duration_seconds_count 1\n"));
  EXPECT_THAT(Scrape(pipeline_->worker_metrics_port(1, replica)),
              HasSubstr("omnistage_worker_aborted_requests_total 1\n"));

  pipeline_->KillWorker(1, 1);
  EXPECT_TRUE(Eventually(
      [&] {
        return absl::StrContains(Scrape(pipeline_->orchestrator_metrics_port()),
                                 "omnistage_replica_up{stage=\"llm\",replica=\"1\"} 0\n");
      },
      absl::Seconds(10)));
  orchestrator = Scrape(pipeline_->orchestrator_metrics_port());
  EXPECT_THAT(orchestrator, HasSubstr("omnistage_replica_evictions_total{stage=\"llm\","
                                      "reason=\"stream_ended\"} 1\n"));
  ExpectPromtoolClean(orchestrator, "orchestrator after the kill");
}

}  // namespace
}  // namespace omnistage
