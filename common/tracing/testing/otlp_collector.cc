#include "common/tracing/testing/otlp_collector.h"

#include "absl/strings/str_cat.h"

namespace omnistage {

using opentelemetry::proto::collector::trace::v1::ExportTraceServiceRequest;
using opentelemetry::proto::collector::trace::v1::ExportTraceServiceResponse;

OtlpCollector::OtlpCollector() {
  grpc::ServerBuilder builder;
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
  builder.RegisterService(this);
  server_ = builder.BuildAndStart();
}

OtlpCollector::~OtlpCollector() {
  if (server_ != nullptr) server_->Shutdown(std::chrono::system_clock::now());
}

std::string OtlpCollector::endpoint() const { return absl::StrCat("http://127.0.0.1:", port_); }

grpc::Status OtlpCollector::Export(grpc::ServerContext*, const ExportTraceServiceRequest* request,
                                   ExportTraceServiceResponse*) {
  absl::MutexLock lock(&mu_);
  for (const auto& resource_spans : request->resource_spans()) {
    std::string service;
    for (const auto& attribute : resource_spans.resource().attributes()) {
      if (attribute.key() == "service.name") service = attribute.value().string_value();
    }
    for (const auto& scope_spans : resource_spans.scope_spans()) {
      for (const auto& span : scope_spans.spans()) spans_.push_back({service, span});
    }
  }
  return grpc::Status::OK;
}

std::vector<CollectedSpan> OtlpCollector::spans() {
  absl::MutexLock lock(&mu_);
  return spans_;
}

bool OtlpCollector::WaitFor(const std::function<bool(const std::vector<CollectedSpan>&)>& done,
                            absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  for (;;) {
    if (done(spans())) return true;
    if (absl::Now() >= deadline) return false;
    absl::SleepFor(absl::Milliseconds(20));
  }
}

}  // namespace omnistage
