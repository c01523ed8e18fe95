// CountingCollector counts the spans of a request as OTLP encodes it, and an
// exporter's batches arrive counted.
#include "tests/bench/counting_collector.h"

#include <memory>
#include <string>

#include "absl/time/clock.h"
#include "common/tracing/grpc_otlp_transport.h"
#include "gtest/gtest.h"
#include "protos/otlp/trace_service.pb.h"

namespace omnistage {
namespace bench {
namespace {

using opentelemetry::proto::collector::trace::v1::ExportTraceServiceRequest;

ExportTraceServiceRequest ThreeSpans() {
  ExportTraceServiceRequest request;
  auto* first = request.add_resource_spans();
  first->mutable_resource()->add_attributes()->set_key("service.name");
  auto* scope = first->add_scope_spans();
  scope->mutable_scope()->set_name("omnistage");
  scope->add_spans()->set_name("Generate");
  scope->add_spans()->set_name("stage thinker");
  auto* span = request.add_resource_spans()->add_scope_spans()->add_spans();
  span->set_name("engine");
  span->set_start_time_unix_nano(12345);
  span->add_attributes()->mutable_value()->set_double_value(0.5);
  return request;
}

TEST(CountingCollectorTest, CountsTheSpansOfARequest) {
  EXPECT_EQ(CountingCollector::CountSpans(ThreeSpans().SerializeAsString()), 3);
  EXPECT_EQ(CountingCollector::CountSpans(""), 0);
  std::string cut = ThreeSpans().SerializeAsString();
  cut.pop_back();
  EXPECT_EQ(CountingCollector::CountSpans(cut), -1);
  EXPECT_EQ(CountingCollector::CountSpans("\x0a\x7f"), -1);
}

TEST(CountingCollectorTest, CountsWhatAnExporterSends) {
  CountingCollector collector;
  GrpcOtlpTransport transport(collector.endpoint().substr(7), grpc::InsecureChannelCredentials(),
                              {});
  ASSERT_TRUE(transport.Send(ThreeSpans().SerializeAsString(), absl::Seconds(10)).ok());
  ASSERT_TRUE(transport.Send(ThreeSpans().SerializeAsString(), absl::Seconds(10)).ok());
  EXPECT_EQ(collector.spans(), 6);
}

}  // namespace
}  // namespace bench
}  // namespace omnistage
