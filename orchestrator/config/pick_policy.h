// How a stage picks the replica for a request not yet bound to one (a stage's
// `pick:` and `prefix:` in the pipeline config; StagePool::Pick applies them;
// docs/routing.md explains each).
#ifndef OMNISTAGE_ORCHESTRATOR_CONFIG_PICK_POLICY_H_
#define OMNISTAGE_ORCHESTRATOR_CONFIG_PICK_POLICY_H_

#include <cstdint>

#include "absl/time/time.h"
#include "common/prefix_blocks.h"

namespace omnistage {

enum class PickPolicy {
  // live[rr % live.size()], rr += 1: the StagePool's own, exact, and the default.
  kRoundRobin,
  // The live replica with the lowest (reported load + requests sent to it since
  // that report) / capacity; ties go round robin. The load is what the worker
  // reports (every orchestrator's requests together), so orchestrators sharing
  // workers see each other's work.
  kLeastLoaded,
  // The live replica where the request's input would cost least: the prefill
  // it would not save (its input's tokens past the prefix that replica most
  // likely caches) plus its load, weighed by PrefixPickOptions; least loaded
  // while the replicas are out of balance (docs/routing.md).
  kPrefixAware,
};

// The knobs of kPrefixAware (a stage's `prefix:`), with their defaults.
struct PrefixPickOptions {
  // The block size of the approximate index, for replicas that report none of
  // their own (precise ones use theirs). `block_tokens`.
  int block_tokens = kDefaultBlockTokens;
  // Whether replicas that report their cache (Ready.prefix_cache) are read
  // from their reports (precise) rather than from where requests were sent
  // (approximate). `mode: auto` (true) or `mode: approximate` (false).
  bool precise = true;
  // What a replica's load weighs in the cost, in tokens of prefill: a replica
  // whose every slot is taken costs this many tokens more than an idle one.
  // `load_cost_tokens`.
  double load_cost_tokens = 1024;
  // Past this spread of load per slot between the most and the least loaded
  // live replica (0.5: half their capacity), the pick is least loaded.
  // `balance_threshold`.
  double balance_threshold = 0.5;
  // The approximate index keeps at most this many blocks per replica (the
  // least recently routed go first), and none older than `index_ttl`.
  // `index_blocks_per_replica`, `index_ttl_ms`.
  int64_t index_blocks_per_replica = 65536;
  absl::Duration index_ttl = absl::Minutes(10);
};

}  // namespace omnistage

#endif  // OMNISTAGE_ORCHESTRATOR_CONFIG_PICK_POLICY_H_
