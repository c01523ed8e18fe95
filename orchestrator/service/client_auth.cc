#include "orchestrator/service/client_auth.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/grpc/grpc_util.h"
#include "common/grpc/tls.h"

namespace omnistage {

absl::StatusOr<std::unique_ptr<ClientAuth>> ClientAuth::Create(const std::string& tokens_file,
                                                               bool require_tls) {
  std::unique_ptr<TokenFile> tokens;
  if (!tokens_file.empty()) {
    absl::StatusOr<std::unique_ptr<TokenFile>> loaded = TokenFile::Load(tokens_file);
    if (!loaded.ok()) return loaded.status();
    tokens = *std::move(loaded);
  }
  return std::make_unique<ClientAuth>(std::move(tokens), require_tls);
}

absl::StatusOr<Caller> ClientAuth::Authenticate(const grpc::ServerContextBase& context) const {
  if (require_tls_ && !ArrivedOverTls(context)) return PlaintextRefused();
  if (tokens_ == nullptr) {
    // A certificate's name (or "" without security): an admin for the
    // operator's calls, owning only its own requests.
    return Caller::Of(PeerIdentity(context), /*admin=*/true, /*abort_any=*/false);
  }
  const auto& metadata = context.client_metadata();
  auto it = metadata.find("authorization");
  if (it == metadata.end()) {
    return absl::UnauthenticatedError(
        "no bearer token: send the metadata 'authorization: Bearer <token>'");
  }
  absl::string_view value(it->second.data(), it->second.size());
  constexpr absl::string_view kScheme = "bearer ";
  if (value.size() <= kScheme.size() || !absl::StartsWithIgnoreCase(value, kScheme)) {
    return absl::UnauthenticatedError("the authorization metadata must be 'Bearer <token>'");
  }
  absl::StatusOr<Caller> caller = tokens_->Find(value.substr(kScheme.size()));
  if (!caller.ok()) return absl::UnauthenticatedError("unknown or revoked token");
  return caller;
}

absl::StatusOr<Caller> ClientAuth::OnBehalfOf(const Caller& caller,
                                              const std::string& identity) const {
  if (tokens_ == nullptr) return Caller::Of(identity);
  if (!caller.acts_for_others) {
    return absl::PermissionDeniedError(
        absl::StrCat("on_behalf_of needs the gateway role; '", caller.identity, "' has ",
                     caller.admin ? "the admin role" : "the user role"));
  }
  absl::StatusOr<Caller> behalf = tokens_->FindIdentity(identity);
  if (!behalf.ok()) return absl::PermissionDeniedError(behalf.status().message());
  return behalf;
}

absl::Status ClientAuth::RequireAdmin(const Caller& caller, absl::string_view call) {
  if (caller.admin) return absl::OkStatus();
  return absl::PermissionDeniedError(
      absl::StrCat(call, " needs the admin role; '", caller.identity, "' has the ",
                   caller.acts_for_others ? "gateway" : "user", " role"));
}

}  // namespace omnistage
