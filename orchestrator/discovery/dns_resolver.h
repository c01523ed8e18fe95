// DnsResolver: what DNS says about the addresses of a name — its A (IPv4) and
// AAAA (IPv6) records, each family on its own — looked up with c-ares, the
// resolver gRPC itself uses.
//
//   absl::StatusOr<std::unique_ptr<DnsResolver>> resolver = DnsResolver::Create({});
//   DnsAnswer answer =
//       (*resolver)->Lookup("omnistage-talker.default.svc.cluster.local");
//   // answer.a:    OK, {"10.1.2.3", "10.1.2.4"}
//   // answer.aaaa: OK, {} (the name has no AAAA record), or UNAVAILABLE
//   //              when the server refused that query
//
// The two families are apart because a server may answer one and refuse or
// fail the other (a resolver with no upstream refuses the AAAA query of a name
// it holds only A records for): an empty family is an answer, a failed one is
// not (dns_families.h keeps each family's last answer).
//
// By default it follows the system's resolver configuration (/etc/resolv.conf:
// its servers, search domains and ndots, as a Kubernetes pod's kubelet writes
// it); `server` sends every query to one DNS server instead (tests, or a cluster
// DNS reached at a known address).
//
// Thread-compatible: one thread at a time (the discovery thread owns one).
// Lookup blocks for at most about tries x timeout.
#ifndef OMNISTAGE_ORCHESTRATOR_DISCOVERY_DNS_RESOLVER_H_
#define OMNISTAGE_ORCHESTRATOR_DISCOVERY_DNS_RESOLVER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
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

// What the servers said about one family of a name.
struct DnsRecords {
  // OK: they answered, and `addresses` is the answer. Otherwise the query
  // failed and says nothing about the name:
  //   UNAVAILABLE         no server answered, or one refused (REFUSED) or
  //                       failed (SERVFAIL);
  //   DEADLINE_EXCEEDED   the servers did not answer in time;
  // the message names the name, the record type and what went wrong.
  absl::Status status;
  // The addresses as text, sorted and without duplicates; empty when the name
  // has no record of this type (NODATA) or does not exist (NXDOMAIN).
  std::vector<std::string> addresses;
  // The answer was NXDOMAIN.
  bool no_such_name = false;
};

struct DnsAnswer {
  DnsRecords a;     // IPv4
  DnsRecords aaaa;  // IPv6
};

class DnsResolver {
 public:
  // INVALID_ARGUMENT for a server that is not host:port; INTERNAL when c-ares
  // cannot start (no resolver configuration, no memory).
  static absl::StatusOr<std::unique_ptr<DnsResolver>> Create(const DnsResolverOptions& options);
  ~DnsResolver();
  DnsResolver(const DnsResolver&) = delete;
  DnsResolver& operator=(const DnsResolver&) = delete;

  // The A and AAAA records of `name`, asked for together.
  DnsAnswer Lookup(const std::string& name);

 private:
  struct Channel;
  explicit DnsResolver(std::unique_ptr<Channel> channel);

  std::unique_ptr<Channel> channel_;
};

}  // namespace omnistage

#endif  // OMNISTAGE_ORCHESTRATOR_DISCOVERY_DNS_RESOLVER_H_
