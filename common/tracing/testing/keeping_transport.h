// KeepingTransport: an OtlpTransport for tests that keeps every span it is
// sent, and a tracer that exports to one (batches leave within a
// millisecond; Flush() sends what waits).
//
//   KeepingTracer traced;
//   core.set_tracer(&traced.tracer());
//   ...
//   std::vector<SpanProto> spans = traced.Flush();
#ifndef OMNISTAGE_COMMON_TRACING_TESTING_KEEPING_TRANSPORT_H_
#define OMNISTAGE_COMMON_TRACING_TESTING_KEEPING_TRANSPORT_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "common/tracing/otlp_transport.h"
#include "common/tracing/tracer.h"
#include "protos/otlp/trace_service.pb.h"

namespace omnistage {

using SpanProto = opentelemetry::proto::trace::v1::Span;

class KeepingTransport : public OtlpTransport {
 public:
  // Keeps the spans of `request`; INVALID_ARGUMENT when it does not decode.
  absl::Status Send(const std::string& request, absl::Duration timeout) override;
  std::string Describe() const override { return "keeping"; }
  std::vector<SpanProto> spans();

 private:
  absl::Mutex mu_;
  std::vector<SpanProto> spans_ ABSL_GUARDED_BY(mu_);
};

// A tracer with `sampler` (default: parentbased_always_on) exporting to a
// KeepingTransport.
class KeepingTracer {
 public:
  explicit KeepingTracer(const std::string& sampler = "", const std::string& arg = "");
  Tracer& tracer() { return *tracer_; }
  // Ends the export (what waits is sent) and returns every span sent.
  std::vector<SpanProto> Flush();

 private:
  KeepingTransport* transport_ = nullptr;  // Owned by the tracer's exporter.
  std::unique_ptr<Tracer> tracer_;
};

}  // namespace omnistage

#endif  // OMNISTAGE_COMMON_TRACING_TESTING_KEEPING_TRANSPORT_H_
