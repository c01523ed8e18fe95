#include "common/host_port.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace omnistage {
namespace {

absl::Status Refuse(absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("expected host:port", why));
}

bool IsNameChar(char c) { return absl::ascii_isalnum(c) || c == '.' || c == '-' || c == '_'; }

bool IsIpv6Char(char c) { return absl::ascii_isxdigit(c) || c == ':' || c == '.'; }

}  // namespace

absl::StatusOr<HostPort> ParseHostPort(absl::string_view address, PortRule rule) {
  absl::string_view host;
  absl::string_view rest;
  HostPort parsed;
  if (!address.empty() && address.front() == '[') {
    const size_t close = address.find(']');
    if (close == absl::string_view::npos) return Refuse(" ('[' without its ']')");
    host = address.substr(1, close - 1);
    rest = address.substr(close + 1);
    if (host.empty() || !std::all_of(host.begin(), host.end(), IsIpv6Char)) {
      return Refuse(" (an IPv6 address in brackets)");
    }
  } else {
    const size_t colon = address.find(':');
    if (colon == absl::string_view::npos) return Refuse(" (no port)");
    host = address.substr(0, colon);
    rest = address.substr(colon);
    if (rest.find(':', 1) != absl::string_view::npos) {
      return Refuse(" (an IPv6 address goes in brackets: [::1]:50051)");
    }
    if (host.empty()) return Refuse(" (no host; 0.0.0.0 is every address of this machine)");
    if (!std::all_of(host.begin(), host.end(), IsNameChar)) {
      return Refuse(" (a host name or address)");
    }
  }
  if (rest.size() < 2 || rest.front() != ':') return Refuse(" (no port)");
  const absl::string_view port = rest.substr(1);
  const int lowest = rule == PortRule::kListen ? 0 : 1;
  if (port.size() > 5 || !std::all_of(port.begin(), port.end(), absl::ascii_isdigit) ||
      !absl::SimpleAtoi(port, &parsed.port) || parsed.port < lowest || parsed.port > 65535) {
    return Refuse(rule == PortRule::kListen ? " (a port in 0..65535)" : " (a port in 1..65535)");
  }
  parsed.host = std::string(host);
  return parsed;
}

std::string FormatHostPort(absl::string_view host, int port) {
  if (host.find(':') != absl::string_view::npos) return absl::StrCat("[", host, "]:", port);
  return absl::StrCat(host, ":", port);
}

}  // namespace omnistage
