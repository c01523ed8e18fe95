// DnsWatcher: looks up the DNS name of every discovered stage on its own
// thread, each at its stage's refresh period, and reports each answer as the
// replica addresses it names ("10.1.2.3:50061", "[fd00::7]:50061").
//
//   auto watcher = DnsWatcher::Start(resolver_options, targets,
//       [&](int stage, absl::StatusOr<std::vector<std::string>> addresses) {
//         loop.Post(...);   // runs on the watcher's thread: hand it over
//       });
//   watcher->Stop();        // wakes the thread and joins it
//
// Each name's A and AAAA records are kept apart (dns_families.h): a family
// whose lookup fails keeps its last addresses while the other follows its
// answers, and only a lookup where every family failed is reported as an
// error.
//
// The first lookups run at once. A lookup blocks the thread for at most the
// resolver's tries x timeout, so Stop() returns within that.
#ifndef OMNISTAGE_ORCHESTRATOR_DISCOVERY_DNS_WATCHER_H_
#define OMNISTAGE_ORCHESTRATOR_DISCOVERY_DNS_WATCHER_H_

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "orchestrator/discovery/dns_families.h"
#include "orchestrator/discovery/dns_resolver.h"

namespace omnistage {

// One stage to watch: its headless Service name and its workers' port.
// The DnsTarget::stage of the orchestrator's peers (not a stage).
inline constexpr int kPeersTarget = -1;

struct DnsTarget {
  // The stage whose replicas the name lists, or kPeersTarget.
  int stage = 0;
  std::string name;
  int port = 0;
  absl::Duration refresh = absl::Seconds(5);
};

class DnsWatcher {
 public:
  using Report =
      std::function<void(int stage, const absl::StatusOr<std::vector<std::string>>& addresses)>;

  // Errors are the resolver's (a `server` that is not host:port).
  static absl::StatusOr<std::unique_ptr<DnsWatcher>> Start(const DnsResolverOptions& options,
                                                           std::vector<DnsTarget> targets,
                                                           Report report);
  ~DnsWatcher();
  // Idempotent; no report runs after it returns.
  void Stop();

 private:
  DnsWatcher(std::unique_ptr<DnsResolver> resolver, std::vector<DnsTarget> targets,
             Report report);
  void Run();

  const std::unique_ptr<DnsResolver> resolver_;
  const std::vector<DnsTarget> targets_;
  const Report report_;
  // One per target, used by the thread only.
  std::vector<DnsFamilies> families_;
  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace omnistage

#endif  // OMNISTAGE_ORCHESTRATOR_DISCOVERY_DNS_WATCHER_H_
