// DnsResolver: the addresses of a DNS name (its A and AAAA records), looked up
// with c-ares, the resolver gRPC itself uses.
//
//   absl::StatusOr<std::unique_ptr<DnsResolver>> resolver = DnsResolver::Create({});
//   absl::StatusOr<std::vector<std::string>> ips =
//       (*resolver)->Resolve("omnistage-talker.default.svc.cluster.local");
//   // {"10.1.2.3", "fd00::7"}, sorted; NOT_FOUND for a name with no address
//
// By default it follows the system's resolver configuration (/etc/resolv.conf:
// its servers, search domains and ndots, as a Kubernetes pod's kubelet writes
// it); `server` sends every query to one DNS server instead (tests, or a cluster
// DNS reached at a known address).
//
// Thread-compatible: one thread at a time (the discovery thread owns one).
// Resolve blocks for at most about tries x timeout.
#ifndef OMNISTAGE_ORCHESTRATOR_DNS_RESOLVER_H_
#define OMNISTAGE_ORCHESTRATOR_DNS_RESOLVER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace omnistage {

struct DnsResolverOptions {
  // host:port of the one DNS server to ask ("127.0.0.1:5353", "[::1]:53");
  // empty: the system's configuration.
  std::string server;
  // Per query try, and how many tries before a server counts as not answering.
  absl::Duration timeout = absl::Seconds(1);
  int tries = 2;
};

class DnsResolver {
 public:
  // INVALID_ARGUMENT for a server that is not host:port; INTERNAL when c-ares
  // cannot start (no resolver configuration, no memory).
  static absl::StatusOr<std::unique_ptr<DnsResolver>> Create(const DnsResolverOptions& options);
  ~DnsResolver();
  DnsResolver(const DnsResolver&) = delete;
  DnsResolver& operator=(const DnsResolver&) = delete;

  // The IPv4 and IPv6 addresses `name` has, as text, sorted and without
  // duplicates. Errors:
  //   NOT_FOUND           the name does not exist, or has neither record (an
  //                       empty answer);
  //   UNAVAILABLE         no server answered, or one refused or failed;
  //   DEADLINE_EXCEEDED   the servers did not answer in time.
  // Every message names `name` and what went wrong.
  absl::StatusOr<std::vector<std::string>> Resolve(const std::string& name);

 private:
  struct Channel;
  explicit DnsResolver(std::unique_ptr<Channel> channel);

  std::unique_ptr<Channel> channel_;
};

}  // namespace omnistage

#endif  // OMNISTAGE_ORCHESTRATOR_DNS_RESOLVER_H_
