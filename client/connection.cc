#include "client/connection.h"

#include <chrono>
#include <cstdlib>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "common/bearer_token.h"
#include "common/grpc/grpc_log.h"

namespace omnistage {

std::shared_ptr<grpc::Channel> Connect(const std::string& server, const ConnectOptions& options) {
  const TlsFiles& tls = options.tls;
  const bool use_tls = options.use_tls;
  grpc::ChannelArguments args;
  if (!options.server_name.empty()) args.SetSslTargetNameOverride(options.server_name);
  auto channel = grpc::CreateCustomChannel(
      server,
      tls.enabled() ? ChannelCredentialsFor(tls)
                    : use_tls ? grpc::SslCredentials(grpc::SslCredentialsOptions())
                              : grpc::InsecureChannelCredentials(),
      args);
  if (!channel->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(5))) {
    // gRPC's own lines about the handshake went to the debug log
    // (common/grpc/grpc_log.h); its reason, when there was one, says what to fix.
    const std::string handshake = LastTlsHandshakeFailure();
    if (use_tls && handshake == "certificate verify failed") {
      std::cerr << "omni: the orchestrator at " << server << " presented a certificate that "
                << (tls.ca.empty() ? "the system's roots do not trust"
                                   : "does not chain to --tls_ca=" + tls.ca)
                << " (certificate verify failed): pass the CA that issued it with --tls_ca\n";
    } else if (use_tls && handshake == "wrong version number") {
      std::cerr << "omni: the orchestrator at " << server
                << " does not speak TLS (wrong version number): drop --tls and --tls_ca\n";
    } else if (use_tls && !handshake.empty()) {
      std::cerr << "omni: cannot reach the orchestrator at " << server
                << " over TLS: the handshake failed (" << handshake
                << "); check --tls_ca, --tls_cert and --tls_key\n";
    } else if (use_tls) {
      std::cerr << "omni: cannot reach the orchestrator at " << server
                << " over TLS (is it running, serving TLS, with a certificate that chains to "
                   "--tls_ca and names the host?)\n";
    } else {
      std::cerr << "omni: cannot reach the orchestrator at " << server
                << " (is it running? start one with ./demo.sh --serve; if it serves TLS, "
                   "pass --tls_ca)\n";
    }
    return nullptr;
  }
  return channel;
}

absl::StatusOr<std::string> LoadToken(const std::string& path) {
  if (!path.empty()) return ReadBearerTokenFile(path, "--token_file");
  const char* env = std::getenv("OMNISTAGE_TOKEN");
  return CleanBearerToken(env != nullptr ? env : "", "$OMNISTAGE_TOKEN");
}

}  // namespace omnistage
