#include "orchestrator/dns_watcher.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace omnistage {
namespace {

// Every address of the name when both families answered, else the first
// failure; NOT_FOUND when neither has one.
absl::StatusOr<std::vector<std::string>> AllAddresses(const std::string& name,
                                                      const DnsAnswer& answer) {
  for (const DnsRecords* family : {&answer.a, &answer.aaaa}) {
    if (!family->status.ok()) return family->status;
  }
  std::vector<std::string> addresses = answer.a.addresses;
  addresses.insert(addresses.end(), answer.aaaa.addresses.begin(), answer.aaaa.addresses.end());
  std::sort(addresses.begin(), addresses.end());
  if (addresses.empty()) {
    return absl::NotFoundError(absl::StrCat(
        "DNS lookup of ", name, ": no address (",
        answer.a.no_such_name && answer.aaaa.no_such_name ? "no such name" : "no A or AAAA record",
        ")"));
  }
  return addresses;
}

}  // namespace

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
    : resolver_(std::move(resolver)), targets_(std::move(targets)), report_(std::move(report)) {}

DnsWatcher::~DnsWatcher() { Stop(); }

void DnsWatcher::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

std::string DnsWatcher::HostPort(const std::string& ip, int port) {
  if (ip.find(':') != std::string::npos) return absl::StrCat("[", ip, "]:", port);
  return absl::StrCat(ip, ":", port);
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
        AllAddresses(target.name, resolver_->Lookup(target.name));
    absl::StatusOr<std::vector<std::string>> addresses;
    if (ips.ok()) {
      addresses.emplace();
      for (const std::string& ip : *ips) addresses->push_back(HostPort(ip, target.port));
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
