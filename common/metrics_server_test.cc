// MetricsServer over real HTTP on loopback: GET /metrics serves the registry
// (checked clean by Debian's promtool), other paths are 404, port 0 picks a
// port, a taken port and a malformed address are refused.
#include "common/metrics_server.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "common/testing/promtool.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "httplib.h"

namespace omnistage {
namespace {

using ::testing::HasSubstr;

MetricsRegistry* SampleRegistry() {
  auto* registry = new MetricsRegistry();
  registry->AddCounter("omnistage_requests_total", "Generate calls that ended.",
                       {"finish_reason"})
      .With({"stop"})
      .Increment(10);
  registry->AddGauge("omnistage_in_flight_requests", "Requests in flight.").With({}).Set(2);
  registry->AddHistogram("omnistage_request_duration_seconds", "End to end.", {"pipeline"},
                         LatencyBuckets())
      .With({"omni"})
      .Observe(0.25);
  return registry;
}

TEST(MetricsServerTest, ServesTheRegistryAtMetricsAndPromtoolAgrees) {
  std::unique_ptr<MetricsRegistry> registry(SampleRegistry());
  auto server = MetricsServer::Start("127.0.0.1:0", registry.get());
  ASSERT_TRUE(server.ok()) << server.status();
  ASSERT_GT((*server)->port(), 0);
  httplib::Client client("127.0.0.1", (*server)->port());
  httplib::Result result = client.Get("/metrics");
  ASSERT_TRUE(result) << httplib::to_string(result.error());
  EXPECT_EQ(result->status, 200);
  EXPECT_THAT(result->get_header_value("Content-Type"), HasSubstr("version=0.0.4"));
  EXPECT_THAT(result->body, HasSubstr("omnistage_requests_total{finish_reason=\"stop\"} 10\n"));
  const PromtoolResult checked = PromtoolCheckMetrics(result->body);
  EXPECT_EQ(checked.exit_code, 0) << checked.output;

  httplib::Result other = client.Get("/");
  ASSERT_TRUE(other);
  EXPECT_EQ(other->status, 404);
}

TEST(MetricsServerTest, PromtoolRejectsWhatBreaksTheFormat) {
  // The check above means something: promtool does fail a bad exposition.
  const PromtoolResult checked = PromtoolCheckMetrics("# TYPE x counter\nx{a=\"b} 1\n");
  EXPECT_NE(checked.exit_code, 0) << checked.output;
}

TEST(MetricsServerTest, ATakenPortAndABadAddressAreRefused) {
  MetricsRegistry registry;
  auto first = MetricsServer::Start("127.0.0.1:0", &registry);
  ASSERT_TRUE(first.ok());
  auto second = MetricsServer::Start(absl::StrCat("127.0.0.1:", (*first)->port()), &registry);
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(MetricsServer::Start("9090", &registry).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MetricsServer::Start("127.0.0.1:99999", &registry).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(MetricsServerTest, StopsAtOnceEvenRightAfterStart) {
  MetricsRegistry registry;
  for (int i = 0; i < 20; ++i) {
    auto server = MetricsServer::Start("127.0.0.1:0", &registry);
    ASSERT_TRUE(server.ok());
  }
}

}  // namespace
}  // namespace omnistage
