#include "orchestrator/discovery/dns_watcher.h"

#include <algorithm>
#include <utility>

#include "absl/time/clock.h"
#include "common/host_port.h"

namespace omnistage {

absl::StatusOr<std::unique_ptr<DnsWatcher>> DnsWatcher::Start(const DnsResolverOptions& options,
                                                              std::vector<DnsTarget> targets,
                                                              Report report) {
  absl::StatusOr<std::unique_ptr<DnsResolver>> resolver = DnsResolver::Create(options);
  if (!resolver.ok()) return resolver.status();
  std::unique_ptr<DnsWatcher> watcher(
      new DnsWatcher(*std::move(resolver), std::move(targets), std::move(report)));
  watcher->thread_ = std::thread([w = watcher.get()] { w->Run(); });
  return watcher;
}

DnsWatcher::DnsWatcher(std::unique_ptr<DnsResolver> resolver, std::vector<DnsTarget> targets,
                       Report report)
    : resolver_(std::move(resolver)), targets_(std::move(targets)), report_(std::move(report)) {
  for (const DnsTarget& target : targets_) families_.emplace_back(target.name);
}

DnsWatcher::~DnsWatcher() { Stop(); }

void DnsWatcher::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void DnsWatcher::Run() {
  std::vector<absl::Time> due(targets_.size(), absl::Now());
  while (true) {
    const size_t next = std::min_element(due.begin(), due.end()) - due.begin();
    {
      absl::MutexLock lock(&mu_);
      if (next >= due.size()) {  // Nothing to watch: wait for Stop().
        mu_.Await(absl::Condition(&stopping_));
        return;
      }
      mu_.AwaitWithDeadline(absl::Condition(&stopping_), due[next]);
      if (stopping_) return;
    }
    const DnsTarget& target = targets_[next];
    absl::StatusOr<std::vector<std::string>> ips =
        families_[next].Update(resolver_->Lookup(target.name));
    absl::StatusOr<std::vector<std::string>> addresses;
    if (ips.ok()) {
      addresses.emplace();
      for (const std::string& ip : *ips) addresses->push_back(FormatHostPort(ip, target.port));
    } else {
      addresses = ips.status();
    }
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return;
    }
    report_(target.stage, addresses);
    due[next] = absl::Now() + target.refresh;
  }
}

}  // namespace omnistage
