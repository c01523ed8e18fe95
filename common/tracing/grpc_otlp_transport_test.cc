#include "common/tracing/grpc_otlp_transport.h"

#include <memory>
#include <string>

#include "absl/synchronization/mutex.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "protos/otlp/trace_service.grpc.pb.h"

namespace omnistage {
namespace {

using opentelemetry::proto::collector::trace::v1::ExportTraceServiceRequest;
using opentelemetry::proto::collector::trace::v1::ExportTraceServiceResponse;
using opentelemetry::proto::collector::trace::v1::TraceService;

// A collector of the test's own: keeps what it got and the api-key header.
class Collector : public TraceService::Service {
 public:
  grpc::Status Export(grpc::ServerContext* context, const ExportTraceServiceRequest* request,
                      ExportTraceServiceResponse*) override {
    absl::MutexLock lock(&mu_);
    got_.push_back(*request);
    auto key = context->client_metadata().find("api-key");
    if (key != context->client_metadata().end()) {
      api_key_ = std::string(key->second.data(), key->second.size());
    }
    return grpc::Status::OK;
  }
  std::vector<ExportTraceServiceRequest> got() {
    absl::MutexLock lock(&mu_);
    return got_;
  }
  std::string api_key() {
    absl::MutexLock lock(&mu_);
    return api_key_;
  }

 private:
  absl::Mutex mu_;
  std::vector<ExportTraceServiceRequest> got_;
  std::string api_key_;
};

// An encoded ExportTraceServiceRequest of one span.
std::string OneSpan() {
  ExportTraceServiceRequest request;
  auto* span = request.add_resource_spans()->add_scope_spans()->add_spans();
  span->set_name("Generate");
  span->set_trace_id(std::string(16, '\x01'));
  span->set_span_id(std::string(8, '\x02'));
  return request.SerializeAsString();
}

TEST(GrpcOtlpTransportTest, ExportsToACollectorWithItsHeaders) {
  Collector collector;
  grpc::ServerBuilder builder;
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&collector);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  const std::string target = "127.0.0.1:" + std::to_string(port);

  GrpcOtlpTransport transport(target, grpc::InsecureChannelCredentials(), {{"Api-Key", "secret"}});
  EXPECT_EQ(transport.Describe(), "grpc " + target);
  ASSERT_TRUE(transport.Send(OneSpan(), absl::Seconds(5)).ok());
  ASSERT_EQ(collector.got().size(), 1u);
  EXPECT_EQ(collector.got()[0].resource_spans(0).scope_spans(0).spans(0).name(), "Generate");
  EXPECT_EQ(collector.api_key(), "secret");

  // A collector gone is worth trying again.
  server->Shutdown();
  const absl::Status down = transport.Send(OneSpan(), absl::Seconds(2));
  EXPECT_FALSE(down.ok());
  EXPECT_TRUE(RetryableExportError(down)) << down;
}

}  // namespace
}  // namespace omnistage
