// Small gRPC helpers shared by both services: status conversion and a server
// with the settings every omnistage server wants (health, reflection, no
// SO_REUSEPORT, keepalive).
#ifndef OMNISTAGE_COMMON_GRPC_UTIL_H_
#define OMNISTAGE_COMMON_GRPC_UTIL_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "grpcpp/grpcpp.h"

namespace omnistage {

grpc::Status ToGrpcStatus(const absl::Status& status);
absl::Status FromGrpcStatus(const grpc::Status& status);

struct GrpcServerOptions {
  // host:port; port 0 picks a free port.
  std::string address = "127.0.0.1:0";
  // Largest message accepted from a client.
  int max_receive_message_bytes = 16 << 20;
};

struct StartedServer {
  std::unique_ptr<grpc::Server> server;
  int port = 0;
};

// Builds and starts a server for `services` with grpc.health.v1 (SERVING) and
// server reflection. UNAVAILABLE if it cannot listen.
absl::StatusOr<StartedServer> StartGrpcServer(const GrpcServerOptions& options,
                                              const std::vector<grpc::Service*>& services);

// Sets the server-wide health status (no-op for a null server).
void SetServing(grpc::Server* server, bool serving);

}  // namespace omnistage

#endif  // OMNISTAGE_COMMON_GRPC_UTIL_H_
