#include "orchestrator/stage_pool.h"

#include <algorithm>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"

namespace omnistage {

struct StagePool::AbortRun {
  // Replica -> its ids, in replica order.
  std::map<int, std::vector<std::string>> groups;
  std::function<void(absl::Status)> done;
};

StagePool::StagePool(int stage_id, std::vector<ReplicaClient*> replicas, bool alive)
    : stage_id_(stage_id), replicas_(std::move(replicas)), alive_(replicas_.size(), alive) {}

absl::StatusOr<int> StagePool::Pick(const std::string& request_id) {
  auto it = bindings_.find(request_id);
  if (it != bindings_.end() && alive_[it->second]) return it->second;
  const std::vector<int> live = LiveReplicas();
  if (live.empty()) {
    return absl::UnavailableError(absl::StrCat("stage ", stage_id_, " has no live replica"));
  }
  const int replica = live[rr_ % live.size()];
  ++rr_;
  bindings_[request_id] = replica;
  return replica;
}

std::optional<int> StagePool::Bound(const std::string& request_id) const {
  auto it = bindings_.find(request_id);
  if (it == bindings_.end()) return std::nullopt;
  return it->second;
}

void StagePool::Release(const std::string& request_id) { bindings_.erase(request_id); }

std::vector<std::string> StagePool::Evict(int replica) {
  alive_[replica] = false;
  std::vector<std::string> affected;
  for (auto it = bindings_.begin(); it != bindings_.end();) {
    if (it->second == replica) {
      affected.push_back(it->first);
      bindings_.erase(it++);
    } else {
      ++it;
    }
  }
  std::sort(affected.begin(), affected.end());
  return affected;
}

void StagePool::Revive(int replica) {
  // A new incarnation holds none of the old state.
  Evict(replica);
  alive_[replica] = true;
}

std::vector<int> StagePool::LiveReplicas() const {
  std::vector<int> live;
  for (int i = 0; i < size(); ++i) {
    if (alive_[i]) live.push_back(i);
  }
  return live;
}

int StagePool::BoundCount(int replica) const {
  int count = 0;
  for (const auto& [id, bound] : bindings_) count += bound == replica ? 1 : 0;
  return count;
}

void StagePool::Abort(const std::vector<std::string>& request_ids,
                      std::function<void(absl::Status)> done) {
  auto run = std::make_shared<AbortRun>();
  for (const std::string& id : request_ids) {
    auto it = bindings_.find(id);
    if (it == bindings_.end()) continue;  // Unbound: nothing to stop here.
    std::vector<std::string>& group = run->groups[it->second];
    if (std::find(group.begin(), group.end(), id) == group.end()) group.push_back(id);
  }
  run->done = std::move(done);
  AbortNext(std::move(run));
}

void StagePool::AbortNext(std::shared_ptr<AbortRun> run) {
  // Drop what an eviction or release took away while earlier calls were in
  // flight: a dead replica has nothing to stop (its requests already failed), and
  // calling it would fail the abort of requests on healthy replicas.
  while (!run->groups.empty()) {
    const int replica = run->groups.begin()->first;
    std::vector<std::string>& ids = run->groups.begin()->second;
    ids.erase(std::remove_if(ids.begin(), ids.end(),
                             [this, replica](const std::string& id) {
                               auto it = bindings_.find(id);
                               return it == bindings_.end() || it->second != replica;
                             }),
              ids.end());
    if (!ids.empty()) break;
    run->groups.erase(run->groups.begin());
  }
  if (run->groups.empty()) {
    run->done(absl::OkStatus());
    return;
  }
  const int replica = run->groups.begin()->first;
  std::vector<std::string> ids = run->groups.begin()->second;
  replicas_[replica]->Abort(ids, [self = shared_from_this(), run, replica](absl::Status status) {
    if (!status.ok()) {
      run->done(absl::Status(status.code(),
                             absl::StrCat("stage ", self->stage_id_, " replica ", replica,
                                          ": abort failed: ", status.message())));
      return;
    }
    // Release only what is still bound here: an eviction or a release may have
    // happened while the call was in flight.
    for (const std::string& id : run->groups.begin()->second) {
      auto it = self->bindings_.find(id);
      if (it != self->bindings_.end() && it->second == replica) self->bindings_.erase(it);
    }
    run->groups.erase(run->groups.begin());
    self->AbortNext(run);
  });
}

}  // namespace omnistage
