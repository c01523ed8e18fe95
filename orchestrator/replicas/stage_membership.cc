#include "orchestrator/replicas/stage_membership.h"

#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/log.h"

namespace omnistage {

StageMembership::StageMembership(std::shared_ptr<StagePool> pool, std::string label,
                                 std::string origin, ReplicaFactory* factory, Scheduler* scheduler)
    : pool_(std::move(pool)),
      label_(std::move(label)),
      origin_(std::move(origin)),
      factory_(factory),
      scheduler_(scheduler) {}

StageMembership::~StageMembership() { alive_.End(); }

void StageMembership::Apply(const absl::StatusOr<std::vector<std::string>>& addresses) {
  if (!addresses.ok() || addresses->empty()) {
    // An empty answer is what a DNS hiccup or a Service with no ready pod
    // looks like; neither is a reason to drop replicas that still answer.
    const std::string error = addresses.ok() ? absl::StrCat(origin_, " answered no address")
                                             : std::string(addresses.status().message());
    // Once per distinct failure: a DNS outage at a 1 s refresh is not a flood.
    if (error != last_error_) {
      LogWarning({"", pool_->stage_id(), -1, ""},
                 absl::StrCat(label_, ": ", error, "; keeping the ", members_.size(),
                              " known replica(s), retrying"));
    }
    last_error_ = error;
    pool_->set_discovery_error(error);
    return;
  }
  if (!last_error_.empty()) {
    LogInfo({"", pool_->stage_id(), -1, ""}, absl::StrCat(label_, ": ", origin_, " answers again"));
  }
  last_error_.clear();
  pool_->set_discovery_error("");
  const std::set<std::string> wanted(addresses->begin(), addresses->end());
  for (const auto& [address, replica] : members_) {
    const bool retiring = pool_->state(replica).retiring;
    if (wanted.count(address) == 0 && !retiring) {
      Leave(address, replica);
    } else if (wanted.count(address) > 0 && retiring) {
      pool_->Unretire(replica);
      LogInfo({"", pool_->stage_id(), replica, ""},
              absl::StrCat(label_, ": ", address, " is back in ", origin_));
    }
  }
  for (const std::string& address : wanted) {
    if (members_.count(address) == 0) Join(address);
  }
}

void StageMembership::Join(const std::string& address) {
  const int replica = pool_->size();
  ReplicaClient* client = factory_->Create(pool_->stage_id(), replica, address);
  const int added = pool_->Add(client, address, origin_);
  members_[address] = added;
  factory_->Start(pool_->stage_id(), added);
  LogInfo({"", pool_->stage_id(), added, ""},
          absl::StrCat(label_, ": ", address, " joined (", origin_, ")"));
}

void StageMembership::Leave(const std::string& address, int replica) {
  LogInfo({"", pool_->stage_id(), replica, ""},
          absl::StrCat(label_, ": ", address, " left ", origin_, "; draining its ",
                       pool_->BoundCount(replica), " request(s)"));
  // The pool calls back from inside whatever released the last binding: the
  // removal runs on a later turn of the loop.
  pool_->Retire(replica, [this, alive = alive_.watch(), address, replica] {
    scheduler_->Post([this, alive, address, replica] {
      if (alive) RemoveIfIdle(address, replica);
    });
  });
}

void StageMembership::RemoveIfIdle(const std::string& address, int replica) {
  const ReplicaState& state = pool_->state(replica);
  // Wanted again, or (never, since it is not picked) bound again meanwhile.
  if (!state.retiring || state.removed || pool_->BoundCount(replica) > 0) return;
  pool_->Remove(replica);
  factory_->Destroy(pool_->stage_id(), replica);
  auto it = members_.find(address);
  if (it != members_.end() && it->second == replica) members_.erase(it);
  LogInfo({"", pool_->stage_id(), replica, ""}, absl::StrCat(label_, ": ", address, " removed"));
}

}  // namespace omnistage
