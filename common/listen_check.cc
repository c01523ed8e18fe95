#include "common/listen_check.h"

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/host_port.h"

namespace omnistage {

namespace {

// The usual fix for a bind() that failed with `error`; "" when there is none.
std::string Fix(int error, const std::string& flag) {
  const std::string give = flag.empty() ? "choose" : absl::StrCat("give ", flag);
  switch (error) {
    case EADDRINUSE:
      return absl::StrCat("; another process holds that port: stop it, or ", give,
                          " another port (0 picks a free one)");
    case EADDRNOTAVAIL:
      return absl::StrCat("; it is no address of this machine: ", give,
                          " one of its addresses (0.0.0.0: all of them)");
    case EACCES:
      return absl::StrCat("; ports below 1024 need privileges: ", give, " a port above 1023");
    default:
      return "";
  }
}

// CheckCanListen, its messages naming `flag` when it is not empty.
absl::Status Check(const std::string& address, const std::string& flag) {
  const std::string where =
      flag.empty() ? address : absl::StrCat(address, " (", flag, ")");
  absl::StatusOr<HostPort> at = ParseHostPort(address, PortRule::kListen);
  if (!at.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot listen on ", where, ": ", at.status().message()));
  }
  if (at->port == 0) return absl::OkStatus();
  const std::string& host = at->host;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  if (const int rc = getaddrinfo(host.c_str(), std::to_string(at->port).c_str(), &hints, &found);
      rc != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot listen on ", where, ": ", gai_strerror(rc)));
  }
  absl::Status status = absl::OkStatus();
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    const int fd = socket(a->ai_family, a->ai_socktype, a->ai_protocol);
    if (fd < 0) continue;
    const int yes = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    const bool bound = bind(fd, a->ai_addr, a->ai_addrlen) == 0 && listen(fd, 1) == 0;
    const int error = errno;
    close(fd);
    if (!bound) {
      status = absl::UnavailableError(absl::StrCat("cannot listen on ", where, ": ",
                                                   std::strerror(error), Fix(error, flag)));
      break;
    }
  }
  freeaddrinfo(found);
  return status;
}

}  // namespace

absl::Status CheckCanListen(const std::string& address) { return Check(address, ""); }

absl::Status CheckCanListenAll(const std::vector<std::pair<std::string, std::string>>& listens) {
  for (const auto& listen : listens) {
    if (listen.second.empty()) continue;
    if (absl::Status s = Check(listen.second, listen.first); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace omnistage
