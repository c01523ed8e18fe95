#include "common/tracing/grpc_otlp_transport.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/grpc/grpc_util.h"

namespace omnistage {

using opentelemetry::proto::collector::trace::v1::ExportTraceServiceRequest;
using opentelemetry::proto::collector::trace::v1::ExportTraceServiceResponse;
using opentelemetry::proto::collector::trace::v1::TraceService;

GrpcOtlpTransport::GrpcOtlpTransport(std::string target,
                                     std::shared_ptr<grpc::ChannelCredentials> credentials,
                                     std::vector<std::pair<std::string, std::string>> headers)
    : target_(std::move(target)), headers_(std::move(headers)) {
  grpc::ChannelArguments args;
  // Reconnect soon after a collector comes back: the exporter's own backoff
  // paces the retries.
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 5000);
  stub_ = TraceService::NewStub(grpc::CreateCustomChannel(target_, credentials, args));
}

absl::Status GrpcOtlpTransport::Send(const ExportTraceServiceRequest& request,
                                     absl::Duration timeout) {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  for (const auto& [key, value] : headers_) {
    context.AddMetadata(absl::AsciiStrToLower(key), value);
  }
  ExportTraceServiceResponse response;
  return FromGrpcStatus(stub_->Export(&context, request, &response));
}

std::string GrpcOtlpTransport::Describe() const { return absl::StrCat("grpc ", target_); }

}  // namespace omnistage
