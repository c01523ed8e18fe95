// The omni CLI's connection: the channel to the orchestrator, with a clear
// message when nothing answers or the TLS handshake fails, and the bearer token.
#ifndef OMNISTAGE_CLIENT_CONNECTION_H_
#define OMNISTAGE_CLIENT_CONNECTION_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/grpc/tls.h"
#include "grpcpp/grpcpp.h"

namespace omnistage {

struct ConnectOptions {
  // Client certificate and CA (--tls_cert, --tls_key, --tls_ca).
  TlsFiles tls;
  // TLS at all (--tls, or any of the files).
  bool use_tls = false;
  // The certificate's host when it differs from the address's (--tls_server_name).
  std::string server_name;
};

// Connects within 5 s, or says on stderr why nothing answers at `server` (what
// to fix for a failed TLS handshake) and returns null.
std::shared_ptr<grpc::Channel> Connect(const std::string& server, const ConnectOptions& options);

// The bearer token: the content of the file at `path`, else (empty `path`)
// $OMNISTAGE_TOKEN, without surrounding whitespace (common/bearer_token.h); ""
// when neither gives one. INVALID_ARGUMENT naming the source, never the token.
absl::StatusOr<std::string> LoadToken(const std::string& path);

}  // namespace omnistage

#endif  // OMNISTAGE_CLIENT_CONNECTION_H_
