// CheckCanListen: whether a TCP host:port can be listened on right now — for
// start-up, to refuse a taken or unknown address with one clear line before
// spawning workers or starting servers (gRPC's own bind failure prints a raw
// error block, after the workers are up).
#ifndef OMNISTAGE_COMMON_LISTEN_CHECK_H_
#define OMNISTAGE_COMMON_LISTEN_CHECK_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"

namespace omnistage {

// `address` is host:port ("127.0.0.1:50051", "0.0.0.0:9090", "[::]:50051",
// "localhost:50051"). OK for port 0. Otherwise binds a socket there (without
// SO_REUSEPORT, so a port in use is found in use) and closes it. Errors:
// INVALID_ARGUMENT (not host:port, unknown host), UNAVAILABLE (in use, not an
// address of this machine): "cannot listen on <address>: <reason>".
// A refusal that has a usual fix names it: a port in use ("...: Address already
// in use; another process holds that port: stop it, or choose another port (0
// picks a free one)"), an address not of this machine, a privileged port.
absl::Status CheckCanListen(const std::string& address);

// What each program checks at start: every {flag, address} of `listens` in
// order, empty addresses skipped. The first refusal, with the flag after the
// address: "cannot listen on 127.0.0.1:50051 (--listen): Address already in
// use; another process holds that port: stop it, or give --listen another port
// (0 picks a free one)".
absl::Status CheckCanListenAll(const std::vector<std::pair<std::string, std::string>>& listens);

}  // namespace omnistage

#endif  // OMNISTAGE_COMMON_LISTEN_CHECK_H_
