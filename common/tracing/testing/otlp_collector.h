// OtlpCollector: an OTLP trace collector of a test's own, in process: the
// TraceService over gRPC on 127.0.0.1 (port 0), keeping every span with its
// resource's service.name, for tests that check what omnistage exports.
//
//   OtlpCollector collector;
//   ... processes export to collector.endpoint() (--otlp_protocol=grpc) ...
//   ASSERT_TRUE(collector.WaitFor([](auto& spans) { return spans.size() >= 4; },
//                                 absl::Seconds(30)));
#ifndef OMNISTAGE_COMMON_TRACING_TESTING_OTLP_COLLECTOR_H_
#define OMNISTAGE_COMMON_TRACING_TESTING_OTLP_COLLECTOR_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "protos/otlp/trace_service.grpc.pb.h"

namespace omnistage {

struct CollectedSpan {
  std::string service;  // The resource's service.name.
  opentelemetry::proto::trace::v1::Span span;
};

class OtlpCollector : public opentelemetry::proto::collector::trace::v1::TraceService::Service {
 public:
  OtlpCollector();
  ~OtlpCollector() override;

  // "http://127.0.0.1:<port>" (plaintext gRPC).
  std::string endpoint() const;

  grpc::Status Export(
      grpc::ServerContext* context,
      const opentelemetry::proto::collector::trace::v1::ExportTraceServiceRequest* request,
      opentelemetry::proto::collector::trace::v1::ExportTraceServiceResponse* response) override;

  std::vector<CollectedSpan> spans();
  // Waits until `done` holds of the spans so far (a copy: `done` may call
  // spans()), or `timeout` passes.
  bool WaitFor(const std::function<bool(const std::vector<CollectedSpan>&)>& done,
               absl::Duration timeout);

 private:
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
  absl::Mutex mu_;
  std::vector<CollectedSpan> spans_ ABSL_GUARDED_BY(mu_);
};

}  // namespace omnistage

#endif  // OMNISTAGE_COMMON_TRACING_TESTING_OTLP_COLLECTOR_H_
