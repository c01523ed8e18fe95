#include "common/grpc/grpc_util.h"

#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/plaintext_warning.h"
#include "common/retry_hint.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/health_check_service_interface.h"
#include "protos/rpc_status.pb.h"

namespace omnistage {

grpc::Status ToGrpcStatus(const absl::Status& status) {
  std::optional<absl::Duration> after = RetryAfterOf(status);
  if (!after.has_value()) {
    return grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                        std::string(status.message()));
  }
  google::rpc::RetryInfo retry;
  retry.mutable_retry_delay()->set_seconds(absl::ToInt64Seconds(*after));
  retry.mutable_retry_delay()->set_nanos(
      static_cast<int32_t>(absl::ToInt64Nanoseconds(*after % absl::Seconds(1))));
  google::rpc::Status details;
  details.set_code(static_cast<int>(status.code()));
  details.set_message(std::string(status.message()));
  details.add_details()->PackFrom(retry);
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                      std::string(status.message()), details.SerializeAsString());
}

absl::Status FromGrpcStatus(const grpc::Status& status) {
  absl::Status converted(static_cast<absl::StatusCode>(status.error_code()),
                         status.error_message());
  google::rpc::Status details;
  if (status.error_details().empty() || !details.ParseFromString(status.error_details())) {
    return converted;
  }
  for (const google::protobuf::Any& detail : details.details()) {
    google::rpc::RetryInfo retry;
    if (!detail.UnpackTo(&retry)) continue;
    converted = WithRetryAfter(std::move(converted),
                               absl::Seconds(retry.retry_delay().seconds()) +
                                   absl::Nanoseconds(retry.retry_delay().nanos()));
  }
  return converted;
}

void ShutDownServer::operator()(grpc::Server* server) const {
  server->Shutdown(absl::ToChronoTime(absl::Now() + kServerShutdownGrace));
  delete server;
}

absl::StatusOr<StartedServer> StartGrpcServer(const GrpcServerOptions& options,
                                              const std::vector<grpc::Service*>& services) {
  grpc::EnableDefaultHealthCheckService(!options.readiness_service.empty());
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  StartedServer started;
  grpc::ServerBuilder builder;
  if (absl::Status s = CheckTlsFiles(options.tls, TlsSide::kServer); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat(options.tls_flags.empty() ? "TLS" : options.tls_flags,
                                               ": ", s.message()));
  }
  builder.AddListeningPort(options.address, ServerCredentialsFor(options.tls), &started.port);
  if (!options.plaintext_health_address.empty()) {
    builder.AddListeningPort(options.plaintext_health_address, grpc::InsecureServerCredentials(),
                             &started.health_port);
  }
  for (grpc::Service* service : services) builder.RegisterService(service);
  builder.SetMaxReceiveMessageSize(options.max_receive_message_bytes);
  // Two processes must never share a port silently.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  // Notice vanished peers; clients may ping too, not closer than min_ping_interval.
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, 10000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS,
                             static_cast<int>(absl::ToInt64Milliseconds(options.min_ping_interval)));
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, kMaxPingStrikes);
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, options.max_streams_per_connection);
  if (options.max_connection_age > absl::ZeroDuration()) {
    builder.AddChannelArgument(
        GRPC_ARG_MAX_CONNECTION_AGE_MS,
        static_cast<int>(absl::ToInt64Milliseconds(options.max_connection_age)));
    builder.AddChannelArgument(
        GRPC_ARG_MAX_CONNECTION_AGE_GRACE_MS,
        static_cast<int>(absl::ToInt64Milliseconds(options.max_connection_age_grace)));
  }
  started.server = builder.BuildAndStart();
  if (started.server == nullptr || started.port == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", options.address));
  }
  if (!options.plaintext_health_address.empty() && started.health_port == 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", options.plaintext_health_address));
  }
  WarnIfPlaintextExposed(options.name, options.address, options.tls.enabled());
  if (grpc::HealthCheckServiceInterface* health = started.server->GetHealthCheckService()) {
    health->SetServingStatus("", true);
    health->SetServingStatus(options.readiness_service, true);
  }
  return started;
}

bool ArrivedOverTls(const grpc::ServerContextBase& context) {
  std::shared_ptr<const grpc::AuthContext> auth = context.auth_context();
  if (auth == nullptr) return false;
  for (const grpc::string_ref& type :
       auth->FindPropertyValues(GRPC_TRANSPORT_SECURITY_TYPE_PROPERTY_NAME)) {
    if (type == GRPC_TLS_TRANSPORT_SECURITY_TYPE || type == GRPC_SSL_TRANSPORT_SECURITY_TYPE) {
      return true;
    }
  }
  return false;
}

absl::Status PlaintextRefused() {
  return absl::UnauthenticatedError(
      "this port answers only health checks in plaintext; call the serving port over TLS");
}

void SetReady(grpc::Server* server, const std::string& service, bool ready) {
  if (server != nullptr && server->GetHealthCheckService() != nullptr) {
    server->GetHealthCheckService()->SetServingStatus(service, ready);
  }
}

}  // namespace omnistage
