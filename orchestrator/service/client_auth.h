// ClientAuth: who is calling the orchestrator, and whether they may make the
// operator's calls (GetPipelineStatus, CallStageUtility).
//
//   --tokens_file set        every call needs "authorization: Bearer <token>";
//                            the token's entry gives the identity and role
//                            (UNAUTHENTICATED without a valid one)
//   client certificates only the certificate's name, with the admin role
//   neither                  identity "" with the admin role (loopback
//                            development, as without security)
//
// The identity owns the requests it starts: only it can Abort them.
// Thread-safe.
#ifndef OMNISTAGE_ORCHESTRATOR_SERVICE_CLIENT_AUTH_H_
#define OMNISTAGE_ORCHESTRATOR_SERVICE_CLIENT_AUTH_H_

#include <memory>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "grpcpp/grpcpp.h"
#include "orchestrator/service/token_file.h"

namespace omnistage {

class ClientAuth {
 public:
  // Loads `tokens_file` (none when empty: calls need no token). Its errors
  // name the file and the entry (token_file.h).
  static absl::StatusOr<std::unique_ptr<ClientAuth>> Create(const std::string& tokens_file,
                                                            bool require_tls);
  // `tokens`: null when calls need no token. `require_tls`: calls that did not
  // come over TLS (the plaintext health port) are refused.
  ClientAuth(std::unique_ptr<TokenFile> tokens, bool require_tls)
      : tokens_(std::move(tokens)), require_tls_(require_tls) {}

  // The caller of `context`'s call, or UNAUTHENTICATED saying what is wrong.
  absl::StatusOr<Caller> Authenticate(const grpc::ServerContextBase& context) const;
  // The caller a request set on_behalf_of `identity` runs as: `caller` must
  // act for others (a gateway's token) and the tokens file name `identity`
  // (PERMISSION_DENIED saying which is not so). Without a tokens file,
  // `identity` with the default priority, weight and no rates.
  absl::StatusOr<Caller> OnBehalfOf(const Caller& caller, const std::string& identity) const;
  // PERMISSION_DENIED unless `caller` is an admin; `call` names the call.
  static absl::Status RequireAdmin(const Caller& caller, absl::string_view call);

 private:
  const std::unique_ptr<TokenFile> tokens_;
  const bool require_tls_;
};

}  // namespace omnistage

#endif  // OMNISTAGE_ORCHESTRATOR_SERVICE_CLIENT_AUTH_H_
