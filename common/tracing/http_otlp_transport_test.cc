#include "common/tracing/http_otlp_transport.h"

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "gtest/gtest.h"
#include "httplib.h"
#include "protos/otlp/trace_service.pb.h"

namespace omnistage {
namespace {

using opentelemetry::proto::collector::trace::v1::ExportTraceServiceRequest;

// An encoded ExportTraceServiceRequest of one span.
std::string OneSpan() {
  ExportTraceServiceRequest request;
  request.add_resource_spans()->add_scope_spans()->add_spans()->set_name("speech");
  return request.SerializeAsString();
}

// A collector of the test's own on 127.0.0.1: answers `status` to POST
// /v1/traces and keeps the last body and api-key header.
class Collector {
 public:
  Collector() {
    server_.Post("/v1/traces",
                 [this](const httplib::Request& request, httplib::Response& response) {
                   ExportTraceServiceRequest got;
                   if (request.get_header_value("Content-Type") == "application/x-protobuf" &&
                       got.ParseFromString(request.body) && got.resource_spans_size() > 0) {
                     last_name_ = got.resource_spans(0).scope_spans(0).spans(0).name();
                   }
                   api_key_ = request.get_header_value("api-key");
                   response.status = status_.load();
                 });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    // stop() before the loop runs would not end it.
    for (int i = 0; i < 5000 && !server_.is_running(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  ~Collector() {
    server_.stop();
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/v1/traces"; }
  void Answer(int status) { status_ = status; }
  // Read after the answer came: the handler ran before it.
  std::string last_name_;
  std::string api_key_;

 private:
  httplib::Server server_;
  int port_ = 0;
  std::atomic<int> status_{200};
  std::thread thread_;
};

TEST(HttpOtlpTransportTest, PostsTheExportAsProtobuf) {
  Collector collector;
  absl::StatusOr<std::unique_ptr<HttpOtlpTransport>> transport =
      HttpOtlpTransport::Create(collector.url(), {{"api-key", "secret"}}, "");
  ASSERT_TRUE(transport.ok()) << transport.status();
  EXPECT_EQ((*transport)->Describe(), "http " + collector.url());
  ASSERT_TRUE((*transport)->Send(OneSpan(), absl::Seconds(5)).ok());
  EXPECT_EQ(collector.last_name_, "speech");
  EXPECT_EQ(collector.api_key_, "secret");
}

TEST(HttpOtlpTransportTest, OtlpsRetryableAnswersAreRetryable) {
  Collector collector;
  std::unique_ptr<HttpOtlpTransport> transport =
      *HttpOtlpTransport::Create(collector.url(), {}, "");
  for (int status : {429, 502, 503, 504}) {
    collector.Answer(status);
    const absl::Status sent = transport->Send(OneSpan(), absl::Seconds(5));
    EXPECT_TRUE(RetryableExportError(sent)) << status << ": " << sent;
    EXPECT_NE(sent.message().find(std::to_string(status)), std::string::npos) << sent;
  }
  collector.Answer(400);
  const absl::Status refused = transport->Send(OneSpan(), absl::Seconds(5));
  EXPECT_FALSE(refused.ok());
  EXPECT_FALSE(RetryableExportError(refused)) << refused;
}

TEST(HttpOtlpTransportTest, ANoneListeningCollectorIsRetryable) {
  int port = 0;
  {
    Collector gone;  // Its port, free again once it stopped.
    port = std::stoi(gone.url().substr(17, gone.url().find('/', 17) - 17));
  }
  std::unique_ptr<HttpOtlpTransport> transport =
      *HttpOtlpTransport::Create("http://127.0.0.1:" + std::to_string(port) + "/v1/traces", {}, "");
  const absl::Status down = transport->Send(OneSpan(), absl::Seconds(2));
  EXPECT_EQ(down.code(), absl::StatusCode::kUnavailable) << down;
}

TEST(HttpOtlpTransportTest, AnUnusableUrlIsRefused) {
  for (const char* url : {"grpc://collector:4317", "collector:4318/v1/traces", "http://"}) {
    EXPECT_EQ(HttpOtlpTransport::Create(url, {}, "").status().code(),
              absl::StatusCode::kInvalidArgument)
        << url;
  }
}

}  // namespace
}  // namespace omnistage
