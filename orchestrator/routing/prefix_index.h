// PrefixIndex: which input blocks each replica of a stage most likely holds in
// its prefix cache, for the prefix-aware pick (docs/routing.md).
//
// Blocks are named as common/prefix_blocks.h names them: one hash stands for a
// whole prefix. Per replica, one of two sources:
// - Approximate (the default): learned from where requests were sent. Routed()
//   records a request's blocks as the replica's most recent; past
//   `index_blocks_per_replica`, the least recently routed tenth is let go at
//   once (one pass, so that a pick costs one table probe per block and no list
//   upkeep), and a block routed longer than `index_ttl` ago counts as gone (and
//   is let go at that pass). It guesses: the replica's own cache may have
//   evicted a block the index still lists.
// - Precise: the replica reports its cache (its worker's Ready.prefix_cache and
//   WorkerLoad.cache events, with its own block size): SetPrecise(), then
//   Apply() for each report. What it lists is what the replica said it holds.
//
// Matched() finds how many leading blocks of an input a replica holds by binary
// search, assuming a replica that holds a block holds the blocks before it:
// true of the approximate index (a request's first block is recorded as its
// most recent, so the deepest blocks go first), and of caches that evict the
// deepest blocks of a prefix first (the simulated engines do,
// docs/engines.md). Where it does not hold, the answer is a guess, never an
// error: a pick may then be less good, nothing else.
//
// Costs: Routed O(blocks) probes (and, amortized, a tenth of a pass over the
// replica's blocks per block past the cap); Apply O(events); Matched
// O(log blocks) probes. Memory: about 45 bytes per approximate block, 16-32 per
// precise one (docs/benchmarks.md has the measured figures).
// Not thread-safe: owned by its StagePool, on the event loop.
#ifndef OMNISTAGE_ORCHESTRATOR_ROUTING_PREFIX_INDEX_H_
#define OMNISTAGE_ORCHESTRATOR_ROUTING_PREFIX_INDEX_H_

#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "orchestrator/config/pick_policy.h"
#include "protos/stage_worker.pb.h"

namespace omnistage {

class PrefixIndex {
 public:
  explicit PrefixIndex(PrefixPickOptions options) : options_(options) {}

  const PrefixPickOptions& options() const { return options_; }

  // Approximate: `blocks` (an input's, in order) were sent to `replica` at
  // `now`. Ignored for a precise replica.
  void Routed(int replica, absl::Span<const uint64_t> blocks, absl::Time now);
  // `replica` reports its cache from now on, with blocks of `block_tokens`
  // tokens holding at most `capacity_blocks`; what was known of it is dropped.
  void SetPrecise(int replica, int block_tokens, int capacity_blocks);
  // A precise replica's report. Ignored for an approximate one.
  void Apply(int replica, const v1::CacheEvents& events);
  // The replica's cache is gone (it went down, or left): it holds nothing and
  // is approximate again until it reports.
  void Forget(int replica);

  // How many leading blocks of `blocks` `replica` holds (named with its
  // block_tokens()).
  int Matched(int replica, absl::Span<const uint64_t> blocks, absl::Time now) const;
  // The size of the blocks `replica` is indexed with.
  int block_tokens(int replica) const;
  bool precise(int replica) const;
  // Blocks indexed for `replica` (the approximate ones may include expired
  // blocks not let go yet).
  int64_t blocks(int replica) const;

 private:
  struct Replica {
    bool precise = false;
    int block_tokens = 0;  // precise only
    int64_t capacity_blocks = 0;
    // Approximate: when each block was routed last, and a counter that orders
    // those routings (a request's first block counts as its latest).
    struct Routing {
      uint64_t order = 0;
      absl::Time at;
    };
    absl::flat_hash_map<uint64_t, Routing> routed;
    uint64_t next_order = 0;
    absl::flat_hash_set<uint64_t> reported;  // precise
  };
  Replica& At(int replica);
  const Replica* Find(int replica) const;
  bool Holds(const Replica& replica, uint64_t block, absl::Time now) const;
  // Lets the expired blocks of `replica` go, and the least recently routed
  // until at most 90% of the cap is left.
  void Shrink(Replica& replica, absl::Time now) const;

  PrefixPickOptions options_;
  std::vector<Replica> replicas_;
};

}  // namespace omnistage

#endif  // OMNISTAGE_ORCHESTRATOR_ROUTING_PREFIX_INDEX_H_
