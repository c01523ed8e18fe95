#include "orchestrator/discovery/dns_families.h"

#include <algorithm>
#include <iterator>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/log.h"

namespace omnistage {

DnsFamilies::DnsFamilies(std::string name) : name_(std::move(name)) {}

void DnsFamilies::Take(Family& family, const DnsRecords& records) {
  if (records.status.ok()) {
    if (!family.logged_failure.empty()) {
      LogInfo(absl::StrCat("DNS lookup of ", name_, " (", family.type, ") answers again"));
    }
    family.logged_failure.clear();
    family.known = records.addresses;
    return;
  }
  const std::string failure(records.status.message());
  // Once per distinct failure: a resolver that always refuses AAAA, asked
  // every second, is not a flood.
  if (failure != family.logged_failure) {
    LogWarning(absl::StrCat(failure, "; keeping the ", family.known.size(), " ", family.type,
                            " address(es) it last answered, retrying"));
  }
  family.logged_failure = failure;
}

absl::StatusOr<std::vector<std::string>> DnsFamilies::Update(const DnsAnswer& answer) {
  std::vector<const absl::Status*> failures;
  for (const Family& family : families_) {
    const absl::Status& status = (answer.*family.records).status;
    if (!status.ok()) failures.push_back(&status);
  }
  if (failures.size() == std::size(families_)) {
    std::vector<std::string> messages;
    for (const absl::Status* failure : failures) messages.emplace_back(failure->message());
    return absl::Status(failures[0]->code(), absl::StrJoin(messages, "; "));
  }
  std::vector<std::string> addresses;
  std::vector<std::string> empty;  // Why each family has no address.
  for (Family& family : families_) {
    const DnsRecords& records = answer.*family.records;
    Take(family, records);
    addresses.insert(addresses.end(), family.known.begin(), family.known.end());
    std::string why = !records.status.ok()   ? absl::StrCat("the ", family.type, " lookup failed")
                      : records.no_such_name ? "no such name"
                                             : absl::StrCat("no ", family.type, " record");
    if (empty.empty() || empty.back() != why) empty.push_back(std::move(why));
  }
  if (!addresses.empty()) {
    std::sort(addresses.begin(), addresses.end());
    return addresses;
  }
  return absl::NotFoundError(
      absl::StrCat("DNS lookup of ", name_, ": no address (", absl::StrJoin(empty, ", "), ")"));
}

}  // namespace omnistage
