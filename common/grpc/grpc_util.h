// Small gRPC helpers shared by both services: status conversion and a server
// with the settings every omnistage server wants (health, reflection, no
// SO_REUSEPORT, keepalive).
//
// Health, as Kubernetes' gRPC probes read it: service "" is liveness (the process
// serves gRPC), the service's own name (e.g. "omnistage.v1.StageWorker") is
// readiness (it should be sent work).
#ifndef OMNISTAGE_COMMON_GRPC_GRPC_UTIL_H_
#define OMNISTAGE_COMMON_GRPC_GRPC_UTIL_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/grpc/tls.h"
#include "common/limits.h"
#include "grpcpp/grpcpp.h"

namespace omnistage {

// A retry hint (retry_hint.h) travels as google.rpc.RetryInfo in the status
// details (grpc-status-details-bin), and comes back from them.
grpc::Status ToGrpcStatus(const absl::Status& status);
absl::Status FromGrpcStatus(const grpc::Status& status);

struct GrpcServerOptions {
  // host:port; port 0 picks a free port.
  std::string address = "127.0.0.1:0";
  // Largest message accepted from a client.
  int max_receive_message_bytes = static_cast<int>(kDefaultWorkerMaxMessageBytes);
  // The readiness name gRPC's built-in health service answers for, SERVING at
  // start (SetReady changes it); "" stays SERVING. Empty: no built-in health
  // service (the caller registers its own). gRPC's switch for it is
  // process-wide: set per server as it is built.
  std::string readiness_service;
  // TLS (re-read when the files change); plaintext when empty, with a loud
  // warning if `address` is not loopback. `name` names the server in it.
  TlsFiles tls;
  std::string name = "this server";
  // How `tls` was given, to name in its errors ("--tls_cert/--tls_key/
  // --tls_client_ca: ... expired on ..."); empty: "TLS".
  std::string tls_flags;
  // With TLS: a second, plaintext port (host:port, 0 picks one) for the
  // kubelet's gRPC probes, which cannot speak TLS. Every service answers there
  // too, so the services must refuse calls that did not come over TLS
  // (ArrivedOverTls) and leave only health checks (and reflection) to it.
  std::string plaintext_health_address;
  // Connections: concurrent streams per connection (more wait in the client);
  // the shortest interval between a client's pings when it has no data in
  // flight — closer ones are strikes, and past kMaxPingStrikes the connection
  // is closed (GOAWAY "too_many_pings"); an age after which a connection is
  // asked to go (zero: never), with a grace for the calls still running.
  int max_streams_per_connection = 4096;
  absl::Duration min_ping_interval = absl::Milliseconds(500);
  absl::Duration max_connection_age = absl::ZeroDuration();
  absl::Duration max_connection_age_grace = absl::ZeroDuration();
};

// Pings closer than GrpcServerOptions::min_ping_interval a connection may send
// before it is closed.
inline constexpr int kMaxPingStrikes = 2;

// How long calls still running at a server's shutdown may take to end before
// they are cancelled.
inline constexpr absl::Duration kServerShutdownGrace = absl::Seconds(1);

// Deletes a started server the way a process stops serving: Shutdown with
// kServerShutdownGrace, then delete (gRPC's own destructor would wait for every
// call without limit).
struct ShutDownServer {
  void operator()(grpc::Server* server) const;
};
// A serving server as a part that owns it: destroying it shuts it down.
using ServingServer = std::unique_ptr<grpc::Server, ShutDownServer>;

struct StartedServer {
  std::unique_ptr<grpc::Server> server;
  int port = 0;
  // The plaintext health port; 0 without one.
  int health_port = 0;
};

// Whether the call came over TLS (false on the plaintext health port, and on
// any port of a server without TLS).
bool ArrivedOverTls(const grpc::ServerContextBase& context);
// What a service answers a call that did not come over TLS on a server that
// has it: UNAUTHENTICATED, saying the port is for health checks.
absl::Status PlaintextRefused();

// Builds and starts a server for `services` with server reflection and, when
// options.readiness_service is set, gRPC's grpc.health.v1. UNAVAILABLE if it
// cannot listen.
absl::StatusOr<StartedServer> StartGrpcServer(const GrpcServerOptions& options,
                                              const std::vector<grpc::Service*>& services);

// Sets the readiness `service` of the built-in health service (no-op for a null
// server or one without it).
void SetReady(grpc::Server* server, const std::string& service, bool ready);

}  // namespace omnistage

#endif  // OMNISTAGE_COMMON_GRPC_GRPC_UTIL_H_
