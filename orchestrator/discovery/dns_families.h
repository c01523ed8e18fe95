// DnsFamilies: the addresses of one DNS name as discovery keeps them from one
// lookup to the next, family by family (A: IPv4, AAAA: IPv6), so that a
// server that answers one family and refuses the other (a resolver with no
// upstream refuses the AAAA query of a name it holds only A records for)
// still gives the replicas of the family it answers:
// - a family that answers has what it answered; an empty answer (NODATA, or
//   NXDOMAIN) is an answer, and leaves that family with no address;
// - a family whose lookup failed (REFUSED, SERVFAIL, no answer in time) keeps
//   the addresses it last answered (none before it ever did); the failure is
//   logged once per new reason, naming the name, the family and the reason,
//   and once more when that family answers again;
// - when every family failed, the update is an error and changes nothing:
//   whoever applies it keeps everything it had (stage_membership.h), and logs
//   it.
//
//   DnsFamilies families("omnistage-talker.default.svc.cluster.local");
//   absl::StatusOr<std::vector<std::string>> ips = families.Update(resolver.Lookup(name));
//   // A {10.1.2.4}, AAAA refused, after A {10.1.2.3} and AAAA {fd00::7}:
//   // {"10.1.2.4", "fd00::7"}
//
// Thread-compatible: the discovery thread keeps one per name it watches.
#ifndef OMNISTAGE_ORCHESTRATOR_DISCOVERY_DNS_FAMILIES_H_
#define OMNISTAGE_ORCHESTRATOR_DISCOVERY_DNS_FAMILIES_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "orchestrator/discovery/dns_resolver.h"

namespace omnistage {

class DnsFamilies {
 public:
  explicit DnsFamilies(std::string name);

  // The name's addresses after `answer`, every family's together, sorted.
  // Errors: every family failed (their failures, the first one's code), or
  // none has an address (NOT_FOUND, saying why).
  absl::StatusOr<std::vector<std::string>> Update(const DnsAnswer& answer);

 private:
  struct Family {
    const char* type;
    DnsRecords DnsAnswer::*records;
    // What it last answered.
    std::vector<std::string> known;
    // The failure last logged; "" while it answers.
    std::string logged_failure;
  };

  // Takes what `records` says of `family`: what it answered, or its failure
  // (logged if new).
  void Take(Family& family, const DnsRecords& records);

  const std::string name_;
  Family families_[2] = {{"A", &DnsAnswer::a, {}, ""}, {"AAAA", &DnsAnswer::aaaa, {}, ""}};
};

}  // namespace omnistage

#endif  // OMNISTAGE_ORCHESTRATOR_DISCOVERY_DNS_FAMILIES_H_
