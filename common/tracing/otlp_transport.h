// OtlpTransport: one way of sending an OTLP trace export to a collector
// (grpc_otlp_transport.h, http_otlp_transport.h), behind OtlpExporter's
// queue. Send blocks its caller (the exporter's own thread) for at most
// `timeout`.
#ifndef OMNISTAGE_COMMON_TRACING_OTLP_TRANSPORT_H_
#define OMNISTAGE_COMMON_TRACING_OTLP_TRANSPORT_H_

#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace omnistage {

class OtlpTransport {
 public:
  virtual ~OtlpTransport() = default;
  // Sends `request`, an encoded
  // opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest. OK
  // when the collector took the spans; UNAVAILABLE (or another code OTLP
  // calls retryable) when the same request may succeed later; any other
  // code: it never will.
  virtual absl::Status Send(const std::string& request, absl::Duration timeout) = 0;
  // Where it sends, for log lines ("grpc 127.0.0.1:4317").
  virtual std::string Describe() const = 0;
};

// Whether OTLP says a failed export may be tried again (UNAVAILABLE,
// DEADLINE_EXCEEDED, ABORTED, CANCELLED, OUT_OF_RANGE, DATA_LOSS, and
// RESOURCE_EXHAUSTED: the collector's back-pressure).
bool RetryableExportError(const absl::Status& status);

}  // namespace omnistage

#endif  // OMNISTAGE_COMMON_TRACING_OTLP_TRANSPORT_H_
