// A Python engine's prefix cache (docs/engines.md, "Prefix cache (Python)"):
// what its class declares and what its cache methods return, as the Engine
// interface's types (stage_worker/engines/base/engine.h). All of it is optional: an engine
// that declares no cache has none.
//
//   prefix_cache                  (block_tokens, capacity_blocks), or a method
//                                 returning it; None or absent: no cache. Read
//                                 once, after the constructor (a cache's size
//                                 is usually a parameter).
//   prefix_cache_stats(self)      -> (blocks, hit_tokens, miss_tokens), ints
//                                 >= 0: required with a cache
//   take_cache_changes(self)      -> list of (block, stored): the blocks stored
//                                 (True) and evicted (False) since the
//                                 previous call, oldest first; block an int in
//                                 [0, 2**64). Optional: without it the engine
//                                 reports no changes
//
// omnistage_engines.batching.Batching implements all three
// (omnistage_engines/prefix_cache.py names blocks as common/prefix_blocks.h).
//
// Every function needs the GIL.
#ifndef OMNISTAGE_STAGE_WORKER_ENGINES_PYTHON_PYTHON_PREFIX_CACHE_H_
#define OMNISTAGE_STAGE_WORKER_ENGINES_PYTHON_PYTHON_PREFIX_CACHE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "stage_worker/engines/base/engine.h"
#include "stage_worker/engines/python/python_runtime.h"

namespace omnistage {

// The cache `instance` (of class `qualified`, "module.Class") declares: {0, 0}
// for none. INVALID_ARGUMENT naming the class and what is wrong: a malformed
// prefix_cache, a cache without a prefix_cache_stats method, or a
// take_cache_changes that is not one. An exception from a prefix_cache method
// propagates (pybind11::error_already_set).
absl::StatusOr<PrefixCacheLayout> ReadPrefixCache(const pybind11::object& instance,
                                                  const std::string& qualified);

// What prefix_cache_stats and take_cache_changes returned; INVALID_ARGUMENT
// saying what the value is and what was expected.
absl::StatusOr<PrefixCacheStats> CacheStatsFromPython(pybind11::handle stats,
                                                      const PrefixCacheLayout& layout);
absl::StatusOr<std::vector<CacheChange>> CacheChangesFromPython(pybind11::handle changes);

}  // namespace omnistage

#endif  // OMNISTAGE_STAGE_WORKER_ENGINES_PYTHON_PYTHON_PREFIX_CACHE_H_
