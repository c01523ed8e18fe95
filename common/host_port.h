// host:port, the one way every binary and config reads and writes a network
// address: "127.0.0.1:50051", "omnistage-talker:50061", "[::1]:50051".
//
//   absl::StatusOr<HostPort> at = ParseHostPort("[::1]:0", PortRule::kListen);
//   // at->host == "::1" (brackets off), at->port == 0
//   FormatHostPort("fd00::7", 50061) == "[fd00::7]:50061"
//
// Rules, the same everywhere:
// - the host is a name or IPv4 address (letters, digits, '.', '-', '_') or an
//   IPv6 address in brackets (hex digits, ':' and '.'); it is never empty;
// - an IPv6 address must be bracketed ("::1:80" is refused: which colon ends
//   the host?), and a '[' must be closed ("[::1:80" is refused);
// - the port is 1..65535 decimal digits, or 0 where a listener may pick one.
// The errors say "expected host:port" and what is wrong; callers prefix what the
// address is for (a flag, a config field).
//
// Thread-safe (no state).
#ifndef OMNISTAGE_COMMON_HOST_PORT_H_
#define OMNISTAGE_COMMON_HOST_PORT_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace omnistage {

struct HostPort {
  std::string host;  // without brackets
  int port = 0;
};

enum class PortRule {
  kDial,    // 1..65535: an address to connect to
  kListen,  // 0..65535: an address to serve on, 0 picking a free port
};

// INVALID_ARGUMENT "expected host:port ...: <why>" unless `address` follows the
// rules above.
absl::StatusOr<HostPort> ParseHostPort(absl::string_view address, PortRule rule);

// "host:port", with an IPv6 host bracketed.
std::string FormatHostPort(absl::string_view host, int port);

}  // namespace omnistage

#endif  // OMNISTAGE_COMMON_HOST_PORT_H_
