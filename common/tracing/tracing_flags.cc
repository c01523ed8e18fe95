#include "common/tracing/tracing_flags.h"

#include <cstdlib>
#include <utility>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/tracing/tracing_options.h"

ABSL_FLAG(std::string, otlp_traces_endpoint, "",
          "where spans go over OTLP: http(s)://host:4318/v1/traces, or host:4317 with "
          "--otlp_protocol=grpc (default: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, else "
          "OTEL_EXPORTER_OTLP_ENDPOINT; none: tracing off); see docs/observability.md");
ABSL_FLAG(std::string, otlp_protocol, "",
          "grpc or http/protobuf (default: OTEL_EXPORTER_OTLP_PROTOCOL, else http/protobuf)");
ABSL_FLAG(std::string, trace_sampler, "",
          "which requests are traced: parentbased_always_on (default), "
          "parentbased_traceidratio, always_on, always_off, traceidratio, "
          "parentbased_always_off (default: OTEL_TRACES_SAMPLER)");
ABSL_FLAG(std::string, trace_sampler_arg, "",
          "the ratio (0..1) of the traceidratio samplers (default: OTEL_TRACES_SAMPLER_ARG)");

namespace omnistage {
namespace {

TracingFlags FlagValues() {
  TracingFlags flags;
  flags.otlp_traces_endpoint = absl::GetFlag(FLAGS_otlp_traces_endpoint);
  flags.otlp_protocol = absl::GetFlag(FLAGS_otlp_protocol);
  flags.trace_sampler = absl::GetFlag(FLAGS_trace_sampler);
  flags.trace_sampler_arg = absl::GetFlag(FLAGS_trace_sampler_arg);
  return flags;
}

}  // namespace

std::vector<std::string> TracingFlagArgs() {
  const TracingFlags flags = FlagValues();
  std::vector<std::string> args;
  for (const auto& [name, value] : {std::pair<const char*, const std::string*>{
                                        "otlp_traces_endpoint", &flags.otlp_traces_endpoint},
                                    {"otlp_protocol", &flags.otlp_protocol},
                                    {"trace_sampler", &flags.trace_sampler},
                                    {"trace_sampler_arg", &flags.trace_sampler_arg}}) {
    if (!value->empty()) args.push_back(absl::StrCat("--", name, "=", *value));
  }
  return args;
}

absl::StatusOr<std::unique_ptr<Tracer>> StartTracing(const std::string& service_name) {
  absl::StatusOr<TracingOptions> options = TracingOptions::Read(
      [](const char* name) { return std::getenv(name); }, FlagValues(), service_name);
  if (!options.ok()) return options.status();
  absl::StatusOr<std::unique_ptr<Tracer>> tracer = options->MakeTracer();
  if (!tracer.ok()) return tracer.status();
  if (options->enabled) LogInfo(absl::StrCat("traces: OTLP ", options->Describe()));
  return tracer;
}

}  // namespace omnistage
