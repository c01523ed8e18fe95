// GrpcOtlpTransport: OTLP over gRPC, the unary call
// opentelemetry.proto.collector.trace.v1.TraceService/Export on one channel
// kept for the process's life (an OTLP collector's port 4317).
//
//   auto transport = std::make_unique<GrpcOtlpTransport>(
//       "otel-collector:4317", grpc::InsecureChannelCredentials(), headers);
#ifndef OMNISTAGE_COMMON_TRACING_GRPC_OTLP_TRANSPORT_H_
#define OMNISTAGE_COMMON_TRACING_GRPC_OTLP_TRANSPORT_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/tracing/otlp_transport.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"

namespace omnistage {

class GrpcOtlpTransport : public OtlpTransport {
 public:
  // `target`: host:port; `headers` go with every call as metadata (keys in
  // lower case).
  GrpcOtlpTransport(std::string target, std::shared_ptr<grpc::ChannelCredentials> credentials,
                    std::vector<std::pair<std::string, std::string>> headers);

  absl::Status Send(const std::string& request, absl::Duration timeout) override;
  std::string Describe() const override;

 private:
  const std::string target_;
  const std::vector<std::pair<std::string, std::string>> headers_;
  std::unique_ptr<grpc::GenericStub> stub_;
};

}  // namespace omnistage

#endif  // OMNISTAGE_COMMON_TRACING_GRPC_OTLP_TRANSPORT_H_
