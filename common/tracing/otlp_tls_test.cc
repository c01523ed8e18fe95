// Export to a collector over TLS (docs/observability.md, "Traces"), set up as
// a user does, with OTEL_* variables: gRPC to an https:// endpoint and HTTP
// to one, the collector's certificate checked against
// OTEL_EXPORTER_OTLP_CERTIFICATE; a collector whose certificate that CA did
// not sign gets nothing.
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "common/grpc/testing/test_pki.h"
#include "common/grpc/tls.h"
#include "common/tracing/testing/otlp_collector.h"
#include "common/tracing/tracing_options.h"
#include "gtest/gtest.h"
#include "httplib.h"

namespace omnistage {
namespace {

// A tracer made from `env` (the variables a user sets); one span exported.
absl::Status ExportOneSpan(const std::map<std::string, std::string>& env) {
  auto getenv = [&env](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  absl::StatusOr<TracingOptions> options = TracingOptions::Read(getenv, {}, "orchestrator");
  if (!options.ok()) return options.status();
  absl::StatusOr<std::unique_ptr<Tracer>> tracer = options->MakeTracer();
  if (!tracer.ok()) return tracer.status();
  Span span = (*tracer)->Start("Generate", Span::Kind::kServer, nullptr, absl::Now());
  (*tracer)->End(span, absl::Now());
  (*tracer)->exporter()->Shutdown(absl::Seconds(10));
  return absl::OkStatus();
}

class OtlpTlsTest : public ::testing::Test {
 protected:
  OtlpTlsTest() : dir_(TestDirectory()), pki_(dir_), other_pki_(dir_, "other-ca") {}
  const std::string dir_;
  TestPki pki_;
  TestPki other_pki_;
};

// A TLS collector of the test's own (the TraceService), counting what it gets.
class TlsCollector {
 public:
  explicit TlsCollector(const TlsFiles& files) {
    grpc::ServerBuilder builder;
    builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
    builder.AddListeningPort("127.0.0.1:0", ServerCredentialsFor(files), &port_);
    builder.RegisterService(&collector_);
    server_ = builder.BuildAndStart();
  }
  ~TlsCollector() { server_->Shutdown(std::chrono::system_clock::now()); }
  int port() const { return port_; }
  size_t received() { return collector_.spans().size(); }

 private:
  OtlpCollector collector_;
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
};

TEST_F(OtlpTlsTest, GrpcToAnHttpsEndpointChecksTheCollectorsCertificate) {
  TlsFiles server = pki_.Issue("collector", {});
  server.ca.clear();  // No client certificate asked for.
  TlsCollector collector(server);
  const std::string endpoint = "https://localhost:" + std::to_string(collector.port());
  ASSERT_TRUE(ExportOneSpan({{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", endpoint},
                             {"OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"},
                             {"OTEL_EXPORTER_OTLP_CERTIFICATE", pki_.ca_file()}})
                  .ok());
  EXPECT_EQ(collector.received(), 1u);
  // A CA that did not sign the collector's certificate: nothing gets there.
  ASSERT_TRUE(ExportOneSpan({{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", endpoint},
                             {"OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"},
                             {"OTEL_EXPORTER_OTLP_TIMEOUT", "1000"},
                             {"OTEL_EXPORTER_OTLP_CERTIFICATE", other_pki_.ca_file()}})
                  .ok());
  EXPECT_EQ(collector.received(), 1u);
}

TEST_F(OtlpTlsTest, HttpToAnHttpsEndpointChecksTheCollectorsCertificate) {
  const TlsFiles server = pki_.Issue("collector", {});
  httplib::SSLServer https(server.cert.c_str(), server.key.c_str());
  absl::Mutex mu;
  int posts = 0;
  https.Post("/v1/traces", [&](const httplib::Request&, httplib::Response& response) {
    absl::MutexLock lock(&mu);
    ++posts;
    response.set_content("", "application/x-protobuf");
  });
  const int port = https.bind_to_any_port("127.0.0.1");
  std::thread serving([&] { https.listen_after_bind(); });
  while (!https.is_running()) absl::SleepFor(absl::Milliseconds(5));
  const std::string endpoint = "https://localhost:" + std::to_string(port);
  ASSERT_TRUE(ExportOneSpan({{"OTEL_EXPORTER_OTLP_ENDPOINT", endpoint},
                             {"OTEL_EXPORTER_OTLP_CERTIFICATE", pki_.ca_file()}})
                  .ok());
  {
    absl::MutexLock lock(&mu);
    EXPECT_EQ(posts, 1);
  }
  ASSERT_TRUE(ExportOneSpan({{"OTEL_EXPORTER_OTLP_ENDPOINT", endpoint},
                             {"OTEL_EXPORTER_OTLP_TIMEOUT", "1000"},
                             {"OTEL_EXPORTER_OTLP_CERTIFICATE", other_pki_.ca_file()}})
                  .ok());
  {
    absl::MutexLock lock(&mu);
    EXPECT_EQ(posts, 1);
  }
  https.stop();
  serving.join();
}

}  // namespace
}  // namespace omnistage
