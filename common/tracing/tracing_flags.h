// The tracing flags every service binary takes (--otlp_traces_endpoint,
// --otlp_protocol, --trace_sampler, --trace_sampler_arg), each overriding
// its OpenTelemetry environment variable (tracing_options.h), and the
// tracer they and the environment describe. List this file among the
// binary's shared flag files (common/flags_usage.h) so --help shows them.
//
//   SetUsage("...", "gateway/main.cc", {kTracingFlagsFile});
//   absl::StatusOr<std::unique_ptr<Tracer>> tracer = StartTracing("gateway");
#ifndef OMNISTAGE_COMMON_TRACING_TRACING_FLAGS_H_
#define OMNISTAGE_COMMON_TRACING_TRACING_FLAGS_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/tracing/tracer.h"

namespace omnistage {

inline constexpr char kTracingFlagsFile[] = "common/tracing/tracing_flags.cc";

// The tracer of this process's flags and environment, `service_name` being
// its default service.name; logs where it exports (or that it is off).
// INVALID_ARGUMENT naming a setting that cannot be used.
absl::StatusOr<std::unique_ptr<Tracer>> StartTracing(const std::string& service_name);

// The tracing flags given to this process, as arguments for a child that
// should trace alike ("--otlp_protocol=grpc", ...; none unset).
std::vector<std::string> TracingFlagArgs();

}  // namespace omnistage

#endif  // OMNISTAGE_COMMON_TRACING_TRACING_FLAGS_H_
