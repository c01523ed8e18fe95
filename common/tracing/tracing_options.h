// TracingOptions: where and how a process exports its spans, read from
// OpenTelemetry's standard environment variables, each of which a flag of
// the same meaning overrides (docs/observability.md, "Traces"):
//
//   OTEL_EXPORTER_OTLP_TRACES_ENDPOINT  --otlp_traces_endpoint  the traces URL as it is
//   OTEL_EXPORTER_OTLP_ENDPOINT         (base URL: http/protobuf adds /v1/traces)
//   OTEL_EXPORTER_OTLP[_TRACES]_PROTOCOL  --otlp_protocol  grpc | http/protobuf (the default)
//   OTEL_EXPORTER_OTLP[_TRACES]_HEADERS   key=value,... (values URL-encoded)
//   OTEL_EXPORTER_OTLP[_TRACES]_CERTIFICATE  the CA that signs the collector's certificate
//   OTEL_EXPORTER_OTLP[_TRACES]_INSECURE  true: plaintext gRPC to an endpoint without a scheme
//   OTEL_EXPORTER_OTLP[_TRACES]_TIMEOUT   milliseconds per export
//   OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES   what the spans say emitted them
//   OTEL_TRACES_SAMPLER, OTEL_TRACES_SAMPLER_ARG  --trace_sampler, --trace_sampler_arg
//   OTEL_BSP_SCHEDULE_DELAY, OTEL_BSP_MAX_QUEUE_SIZE, OTEL_BSP_MAX_EXPORT_BATCH_SIZE
//   OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none: off
//
// No endpoint at all: tracing is off. A value that cannot be used is an
// error naming it (the process refuses to start rather than trace nothing
// quietly).
//
//   absl::StatusOr<TracingOptions> options = TracingOptions::Read(std::getenv, flags,
//   "orchestrator"); absl::StatusOr<std::unique_ptr<Tracer>> tracer = options->MakeTracer();
#ifndef OMNISTAGE_COMMON_TRACING_TRACING_OPTIONS_H_
#define OMNISTAGE_COMMON_TRACING_TRACING_OPTIONS_H_

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "common/tracing/otlp_exporter.h"
#include "common/tracing/sampler.h"
#include "common/tracing/tracer.h"

namespace omnistage {

// The flags that override the environment; empty: not given.
struct TracingFlags {
  std::string otlp_traces_endpoint;
  std::string otlp_protocol;
  std::string trace_sampler;
  std::string trace_sampler_arg;
};

struct TracingOptions {
  enum class Protocol { kGrpc, kHttpProtobuf };

  bool enabled = false;
  Protocol protocol = Protocol::kHttpProtobuf;
  // gRPC: host:port; HTTP: the whole URL.
  std::string endpoint;
  // gRPC over TLS (an https:// endpoint, or one without a scheme unless
  // insecure).
  bool tls = false;
  std::string ca_file;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string sampler_name;
  std::string sampler_arg;
  OtlpExportOptions export_options;

  // `getenv` as std::getenv (returns null for unset); `service_name` unless
  // OTEL_SERVICE_NAME (or service.name in OTEL_RESOURCE_ATTRIBUTES) names
  // another.
  static absl::StatusOr<TracingOptions> Read(const std::function<const char*(const char*)>& getenv,
                                             const TracingFlags& flags,
                                             const std::string& service_name);

  // The tracer these options describe (off when not enabled).
  absl::StatusOr<std::unique_ptr<Tracer>> MakeTracer() const;
  // For the start-up log line: "grpc https://collector:4317 parentbased_always_on" or "off".
  std::string Describe() const;
};

}  // namespace omnistage

#endif  // OMNISTAGE_COMMON_TRACING_TRACING_OPTIONS_H_
