// StageMembership: keeps the replicas of one discovered stage equal to what
// discovery (DNS) last said, with the StagePool's membership rules:
// - an address new to the answer becomes a new replica (a session, Hello/Ready,
//   then live), appended so existing bindings and the round robin keep their
//   meaning;
// - an address that left the answer retires: picked for no new request, its
//   bound requests run to their end (or until its stream breaks, which fails
//   only them), then it is removed and its session closed;
// - an address that comes back before its removal is simply wanted again;
// - a failed lookup (error, empty answer) changes nothing: the last known set
//   stays, the failure is logged and shown in status, and the next refresh
//   tries again. (A lookup where only one family, A or AAAA, failed arrives
//   as an answer: dns_families.h kept that family's last addresses in it.)
// A worker that restarts on the same address is a new incarnation of the same
// replica (the pool's handshake rule); nothing here is involved.
//
// Not thread-safe: runs on the orchestrator's event loop.
#ifndef OMNISTAGE_ORCHESTRATOR_REPLICAS_STAGE_MEMBERSHIP_H_
#define OMNISTAGE_ORCHESTRATOR_REPLICAS_STAGE_MEMBERSHIP_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/liveness.h"
#include "common/scheduler.h"
#include "orchestrator/routing/replica_client.h"
#include "orchestrator/routing/stage_pool.h"

namespace omnistage {

// Makes and frees the client of each replica (replica_set.h; fakes in tests).
class ReplicaFactory {
 public:
  virtual ~ReplicaFactory() = default;
  // The client of replica `replica` of `stage`, at `address`; not started.
  virtual ReplicaClient* Create(int stage, int replica, const std::string& address) = 0;
  // Starts its session, once the pool knows the replica.
  virtual void Start(int stage, int replica) = 0;
  // Closes and frees it; the pool has forgotten the replica.
  virtual void Destroy(int stage, int replica) = 0;
};

class StageMembership {
 public:
  // `label` names the stage in logs ("stage 1 (talker)"); `origin` is what
  // status shows for its replicas ("dns:<name>").
  StageMembership(std::shared_ptr<StagePool> pool, std::string label, std::string origin,
                  ReplicaFactory* factory, Scheduler* scheduler);
  ~StageMembership();

  // Discovery's latest answer: host:port of every replica, or why the lookup
  // failed.
  void Apply(const absl::StatusOr<std::vector<std::string>>& addresses);

  // Replicas this membership holds (live, retiring or dead), by address.
  const std::map<std::string, int>& members() const { return members_; }

 private:
  void Join(const std::string& address);
  void Leave(const std::string& address, int replica);
  // Runs on its own loop turn once a retired replica holds nothing.
  void RemoveIfIdle(const std::string& address, int replica);

  const std::shared_ptr<StagePool> pool_;
  const std::string label_;
  const std::string origin_;
  ReplicaFactory* const factory_;
  Scheduler* const scheduler_;
  std::map<std::string, int> members_;
  std::string last_error_;
  // Expires with the membership, so late idle callbacks do nothing.
  Liveness alive_;
};

}  // namespace omnistage

#endif  // OMNISTAGE_ORCHESTRATOR_REPLICAS_STAGE_MEMBERSHIP_H_
