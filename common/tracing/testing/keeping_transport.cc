#include "common/tracing/testing/keeping_transport.h"

#include <utility>

namespace omnistage {

absl::Status KeepingTransport::Send(const std::string& bytes, absl::Duration) {
  opentelemetry::proto::collector::trace::v1::ExportTraceServiceRequest request;
  if (!request.ParseFromString(bytes)) {
    return absl::InvalidArgumentError("not an ExportTraceServiceRequest");
  }
  absl::MutexLock lock(&mu_);
  for (const auto& resource_spans : request.resource_spans()) {
    for (const auto& scope_spans : resource_spans.scope_spans()) {
      for (const auto& span : scope_spans.spans()) spans_.push_back(span);
    }
  }
  return absl::OkStatus();
}

std::vector<SpanProto> KeepingTransport::spans() {
  absl::MutexLock lock(&mu_);
  return spans_;
}

KeepingTracer::KeepingTracer(const std::string& sampler, const std::string& arg) {
  auto transport = std::make_unique<KeepingTransport>();
  transport_ = transport.get();
  OtlpExportOptions options;
  options.delay = absl::Milliseconds(1);
  tracer_ = std::make_unique<Tracer>(*Sampler::Parse(sampler, arg),
                                     std::make_unique<OtlpExporter>(options, std::move(transport)));
}

std::vector<SpanProto> KeepingTracer::Flush() {
  tracer_->exporter()->Shutdown(absl::Seconds(10));
  return transport_->spans();
}

}  // namespace omnistage
