// The warning a server logs when it listens in plaintext where others can reach
// it: every binary says it the same way, once, at start-up ("PLAINTEXT: ...").
// Loopback addresses are exempt (development on one machine).
//
//   WarnIfPlaintextExposed("the orchestrator", "0.0.0.0:50051", /*tls=*/false);
//
// Thread-safe (no state; logs through common/log.h).
#ifndef OMNISTAGE_COMMON_PLAINTEXT_WARNING_H_
#define OMNISTAGE_COMMON_PLAINTEXT_WARNING_H_

#include <string>

#include "absl/strings/string_view.h"

namespace omnistage {

// What plaintext exposes on a server, and what to do about it.
struct PlaintextRisk {
  std::string risk = "anyone who can reach this port can use it and read its traffic";
  std::string remedy =
      "Set --tls_cert and --tls_key (and --tls_client_ca to require client certificates); "
      "see docs/security.md";
};

// Whether `host` (of host:port, brackets allowed) is loopback only:
// 127.0.0.0/8, ::1, localhost.
bool IsLoopbackHost(absl::string_view host);

// Logs "PLAINTEXT: <what> serves <address> without TLS: <risk>. <remedy>" when
// `tls` is off and `address` (host:port) is not loopback; nothing otherwise.
void WarnIfPlaintextExposed(absl::string_view what, absl::string_view address, bool tls,
                            const PlaintextRisk& risk = {});

}  // namespace omnistage

#endif  // OMNISTAGE_COMMON_PLAINTEXT_WARNING_H_
