// Failover (docs/reliability.md, "Failover"): on a stage with
// `failover: {max_attempts: N}`, a request whose replica goes away (its stream
// breaks, it stalls, a send to it fails, its drain timeout stops the request)
// is started again on another live replica of the stage, with the same
// parameters and every input the stage had received, while the stages around
// it keep their bindings. An engine that resumes by replay runs it again and
// the part already delivered is dropped (replay.h), checked against what was
// delivered; one that resumes by continuation is sent what it produced and
// goes on after it. Either way the client and the next stage receive exactly
// what a fault-free run would have given them.
//
// This class keeps each request's FailoverState (what it keeps, within
// limits.max_replay_bytes) and resumes a stage; PipelineCore decides when.
// Not thread-safe: runs on the core's loop.
#ifndef OMNISTAGE_ORCHESTRATOR_CORE_FAILOVER_H_
#define OMNISTAGE_ORCHESTRATOR_CORE_FAILOVER_H_

#include <memory>
#include <optional>
#include <vector>

#include "orchestrator/core/core_parts.h"
#include "orchestrator/core/request_table.h"
#include "orchestrator/routing/stage_pool.h"
#include "protos/orchestrator.pb.h"

namespace omnistage {

class Failover {
 public:
  explicit Failover(CoreParts core);

  // What a new request through stage `last_stage` keeps to fail over with;
  // null when none of its stages fails over or it asked not to.
  std::unique_ptr<FailoverState> StateFor(const v1::GenerateRequest& request, int last_stage) const;
  // Whether `r` fails over on `stage`: the stage has it on, the request did
  // not opt out, and what it keeps stayed within limits.max_replay_bytes.
  bool Covers(const InFlightRequest& r, int stage) const;
  // Keeps `payload`, handed to `stage` as input, to resume the stage with;
  // `complete`: nothing more comes.
  void KeepInput(InFlightRequest& r, int stage, const v1::Payload& payload, bool complete);
  // Before anyone sees `output` of `stage`: drops what a replayed run repeats
  // and keeps what the request needs to go on. The error to fail the request
  // with when a replay differs from what was delivered (DATA_LOSS); a finished
  // output's binding is released then.
  std::optional<v1::Error> PassOn(InFlightRequest& r, int stage, int replica,
                                  v1::RequestOutput& output);

  // How a resume went.
  struct Resumed {
    // Set when the request cannot go on: lost `error` said why it stopped,
    // this says also why it was not resumed.
    std::optional<v1::Error> failed;
    // Replicas found dead while picking another (already evicted): their own
    // requests are lost in turn.
    std::vector<ReplicaLoss> lost;
  };
  // Resumes `r` on another replica of `stage` after `lost_replica` lost it
  // with `error`. Deferred (nothing failed) while an abort holds the request:
  // the stage is marked and Resume is called again if that abort fails.
  Resumed Resume(InFlightRequest& r, int stage, int lost_replica, const v1::Error& error);

 private:
  // Counts `bytes` more kept for `r`; past limits.max_replay_bytes everything
  // kept is dropped and `r` fails over no more.
  void Charge(InFlightRequest& r, int stage, int64_t bytes);

  const CoreParts core_;
  // The first stage with failover on (none: past the last); a request that
  // ends before it keeps nothing.
  int first_stage_;
};

}  // namespace omnistage

#endif  // OMNISTAGE_ORCHESTRATOR_CORE_FAILOVER_H_
