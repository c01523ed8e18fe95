// PrefixCache: the simulated prefix cache of the built-in engines
// (docs/engines.md, "Prefix cache"): which blocks of input a replica holds, as a
// GPU engine holds the KV of the prompts it has prefilled. Blocks are named as
// common/prefix_blocks.h names them (docs/routing.md), so the orchestrator can
// tell from the names alone which replica holds a prompt's prefix.
//
// - A set of block names with a capacity in blocks; a full cache evicts its
//   least recently used block to store another.
// - Run() takes the next whole blocks of one request's input, in order. The
//   leading ones the cache holds are hits; from the first block it does not
//   hold, every block is a miss, held or not (as in vLLM: a block's KV depends
//   on everything before it, so a prefix is reused only up to its first gap).
//   The hits are looked up before anything is stored; then every block of the
//   run is stored, or touched if held, deepest first: the run's first block
//   becomes the most recently used, so a full cache lets a prefix's deepest
//   blocks go first and keeps the shared beginnings (as vLLM frees a request's
//   blocks tail first). A cache that holds a block then holds the blocks before
//   it in the same run, which the orchestrator's prefix index relies on
//   (docs/routing.md).
// - Tokens that make no whole block (an input's tail) are prefilled and never
//   stored: CountMiss().
// - Every store and eviction is logged, in order, until TakeChanges() (the
//   worker takes them after each step and tells the sessions that asked; an
//   engine driven without a worker, as in tests, keeps them until taken).
//
//   PrefixCache cache(/*capacity_blocks=*/1024, /*block_tokens=*/16);
//   bool hitting = true;  // per request and input kind
//   int64_t hit_tokens = cache.Run(TextBlockHashes(prompt, 16), &hitting);
//
// Not thread-safe: the engine's busy-loop thread owns it.
#ifndef OMNISTAGE_STAGE_WORKER_ENGINES_BASE_PREFIX_CACHE_H_
#define OMNISTAGE_STAGE_WORKER_ENGINES_BASE_PREFIX_CACHE_H_

#include <cstdint>
#include <list>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/types/span.h"
#include "stage_worker/engines/base/engine.h"

namespace omnistage {

class PrefixCache {
 public:
  // `capacity_blocks` >= 1; `block_tokens` in 1..kMaxBlockTokens.
  PrefixCache(int capacity_blocks, int block_tokens);

  // Runs `blocks`, the next whole blocks of one input, through the cache.
  // `hitting` is that input's state: true until one of its blocks missed (true
  // for its first run). Returns the tokens found cached; the rest of the run's
  // tokens count as misses.
  int64_t Run(absl::Span<const uint64_t> blocks, bool* hitting);
  // Counts `tokens` prefilled outside any whole block as misses.
  void CountMiss(int64_t tokens) { stats_.miss_tokens += tokens; }

  // Whether `block` is held now (tests).
  bool Holds(uint64_t block) const { return where_.contains(block); }
  // Every block held, least recently used first.
  std::vector<uint64_t> Blocks() const { return {order_.begin(), order_.end()}; }

  PrefixCacheLayout layout() const { return {block_tokens_, capacity_blocks_}; }
  PrefixCacheStats stats() const;
  // The stores and evictions since the previous call, oldest first.
  std::vector<CacheChange> TakeChanges();

 private:
  // Stores `block` as the most recently used, evicting the least recently used
  // one if the cache is full; or moves it there if held.
  void Touch(uint64_t block);

  const int capacity_blocks_;
  const int block_tokens_;
  std::list<uint64_t> order_;  // least recently used first
  absl::flat_hash_map<uint64_t, std::list<uint64_t>::iterator> where_;
  PrefixCacheStats stats_;  // its `blocks` is filled in by stats()
  std::vector<CacheChange> changes_;
};

}  // namespace omnistage

#endif  // OMNISTAGE_STAGE_WORKER_ENGINES_BASE_PREFIX_CACHE_H_
