#include "common/tracing/grpc_otlp_transport.h"

#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "common/grpc/grpc_util.h"

namespace omnistage {
namespace {

constexpr char kExportMethod[] = "/opentelemetry.proto.collector.trace.v1.TraceService/Export";
// Past the call's own deadline, how long Send waits for gRPC to report it
// before cancelling the call (gRPC then ends it at once).
constexpr absl::Duration kDeadlineGrace = absl::Seconds(5);

}  // namespace

GrpcOtlpTransport::GrpcOtlpTransport(std::string target,
                                     std::shared_ptr<grpc::ChannelCredentials> credentials,
                                     std::vector<std::pair<std::string, std::string>> headers)
    : target_(std::move(target)), headers_(std::move(headers)) {
  grpc::ChannelArguments args;
  // Reconnect soon after a collector comes back: the exporter's own backoff
  // paces the retries.
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 5000);
  stub_ =
      std::make_unique<grpc::GenericStub>(grpc::CreateCustomChannel(target_, credentials, args));
}

absl::Status GrpcOtlpTransport::Send(const std::string& request, absl::Duration timeout) {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  for (const auto& [key, value] : headers_) {
    context.AddMetadata(absl::AsciiStrToLower(key), value);
  }
  grpc::Slice slice(request);
  const grpc::ByteBuffer request_bytes(&slice, 1);
  grpc::ByteBuffer response;
  grpc::Status status;
  absl::Notification done;
  stub_->UnaryCall(&context, kExportMethod, grpc::StubOptions(), &request_bytes, &response,
                   [&](grpc::Status s) {
                     status = std::move(s);
                     done.Notify();
                   });
  if (!done.WaitForNotificationWithTimeout(timeout + kDeadlineGrace)) {
    context.TryCancel();
    done.WaitForNotification();
  }
  return FromGrpcStatus(status);
}

std::string GrpcOtlpTransport::Describe() const { return absl::StrCat("grpc ", target_); }

}  // namespace omnistage
