#include "common/plaintext_warning.h"

#include <arpa/inet.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/host_port.h"
#include "common/log.h"

namespace omnistage {

bool IsLoopbackHost(absl::string_view host) {
  if (absl::StartsWith(host, "[") && absl::EndsWith(host, "]")) {
    host = host.substr(1, host.size() - 2);
  }
  if (host == "localhost") return true;
  const std::string text(host);
  in_addr v4;
  if (inet_pton(AF_INET, text.c_str(), &v4) == 1) {
    return (ntohl(v4.s_addr) >> 24) == 127;
  }
  in6_addr v6;
  return inet_pton(AF_INET6, text.c_str(), &v6) == 1 && IN6_IS_ADDR_LOOPBACK(&v6);
}

void WarnIfPlaintextExposed(absl::string_view what, absl::string_view address, bool tls,
                            const PlaintextRisk& risk) {
  if (tls) return;
  // An address that does not parse is refused where it is listened on.
  absl::StatusOr<HostPort> at = ParseHostPort(address, PortRule::kListen);
  if (at.ok() && IsLoopbackHost(at->host)) return;
  LogWarning(absl::StrCat("PLAINTEXT: ", what, " serves ", address, " without TLS: ", risk.risk,
                          ". ", risk.remedy));
}

}  // namespace omnistage
