// How a stage picks the replica for a request not yet bound to one (a stage's
// `pick:` in the pipeline config; StagePool::Pick applies it).
#ifndef OMNISTAGE_ORCHESTRATOR_CONFIG_PICK_POLICY_H_
#define OMNISTAGE_ORCHESTRATOR_CONFIG_PICK_POLICY_H_

namespace omnistage {

enum class PickPolicy {
  // live[rr % live.size()], rr += 1: the StagePool's own, exact, and the default.
  kRoundRobin,
  // The live replica with the lowest (reported load + requests sent to it since
  // that report) / capacity; ties go round robin. The load is what the worker
  // reports (every orchestrator's requests together), so orchestrators sharing
  // workers see each other's work.
  kLeastLoaded,
};

}  // namespace omnistage

#endif  // OMNISTAGE_ORCHESTRATOR_CONFIG_PICK_POLICY_H_
