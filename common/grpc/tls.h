// TLS for omnistage's gRPC servers and channels, from PEM files.
//
// gRPC's own FileWatcherCertificateProvider reads the files and reads them again
// when they change (cert-manager and Kubernetes Secrets replace them in place):
// a rotation needs no restart and drops no stream — connections made after it
// use the new certificate, open ones keep the one they were made with.
//
//   TlsFiles tls{"/tls/tls.crt", "/tls/tls.key", "/tls/ca.crt"};
//   if (absl::Status s = CheckTlsFiles(tls, TlsSide::kServer); !s.ok()) ...
//   builder.AddListeningPort(address, ServerCredentialsFor(tls));
//
// Empty files mean plaintext (loopback development; see common/plaintext_warning.h).
#ifndef OMNISTAGE_COMMON_GRPC_TLS_H_
#define OMNISTAGE_COMMON_GRPC_TLS_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "grpcpp/grpcpp.h"

namespace omnistage {

// How often the files are looked at for changes.
constexpr unsigned kTlsRefreshSeconds = 2;

struct TlsFiles {
  // Own certificate chain and its private key (PEM). A server needs both; a
  // client sets them to present a client certificate (mTLS).
  std::string cert;
  std::string key;
  // CA bundle (PEM) the peer's certificate must chain to. On a server: clients
  // must present a certificate chaining to it. On a client: verifies the server
  // (empty: the system's roots).
  std::string ca;

  bool enabled() const { return !cert.empty() || !key.empty() || !ca.empty(); }
};

enum class TlsSide { kServer, kClient };

// Refuses, with a message naming the file, what would only fail later in every
// handshake: a server without certificate and key, a certificate without its
// key (or the reverse), a file that cannot be read or holds no PEM of its kind,
// a key that does not belong to the certificate. OK for empty files.
absl::Status CheckTlsFiles(const TlsFiles& files, TlsSide side);

// TLS server credentials (clients must present a certificate chaining to
// files.ca when it is set); plaintext when !files.enabled().
std::shared_ptr<grpc::ServerCredentials> ServerCredentialsFor(const TlsFiles& files);

// TLS channel credentials verifying the server's certificate chain and that it
// names the host dialled (or the channel's GRPC_SSL_TARGET_NAME_OVERRIDE_ARG);
// plaintext when !files.enabled().
std::shared_ptr<grpc::ChannelCredentials> ChannelCredentialsFor(const TlsFiles& files);

// The authenticated identity of a call's peer: the first subject alternative
// name (or common name) of its verified client certificate; "" when the peer
// presented none or the connection is plaintext.
std::string PeerIdentity(const grpc::ServerContextBase& context);

}  // namespace omnistage

#endif  // OMNISTAGE_COMMON_GRPC_TLS_H_
