// WorkerMetrics: a stage worker's Prometheus metrics (docs/observability.md
// lists them): the busy loop's steps, their duration and size, what the engine
// holds, idle versus stepping time, aborts, utility calls, sessions and the
// input queue; for an engine with a prefix cache, the cache's figures. The busy
// loop reports through the typed methods (the cache's figures copied after each
// step); the queue and session gauges are read when a scrape asks. Thread-safe
// (atomics), but for AddPrefixCache() and SetPrefixCache().
#ifndef OMNISTAGE_STAGE_WORKER_WORKER_METRICS_H_
#define OMNISTAGE_STAGE_WORKER_WORKER_METRICS_H_

#include <cstddef>

#include "absl/time/time.h"
#include "common/metrics.h"
#include "stage_worker/engines/base/engine.h"

namespace omnistage {

class WorkerMetrics {
 public:
  // Adds the families to `registry`, which must outlive this object.
  explicit WorkerMetrics(MetricsRegistry* registry);

  void Idle(absl::Duration blocked);
  // The loop waited for slow readers before its next step (backpressure).
  void WaitedForReaders(absl::Duration waited);
  void Stepped(absl::Duration took, size_t outputs, EngineLoad load);
  void AbortApplied(size_t ids, EngineLoad load);
  void UtilityDone(bool ok);
  void SetQueueDepth(size_t depth) { queue_depth_.Set(static_cast<double>(depth)); }
  void SetSessions(size_t sessions) { sessions_.Set(static_cast<double>(sessions)); }
  // Adds the prefix cache's families, for an engine that has one (`layout`'s
  // block_tokens > 0). Once, before the busy loop starts.
  void AddPrefixCache(PrefixCacheLayout layout);
  // The cache's figures after a step. Busy-loop thread only, after
  // AddPrefixCache().
  void SetPrefixCache(const PrefixCacheStats& stats);

 private:
  void SetLoad(EngineLoad load);

  Histogram& step_duration_;
  Histogram& step_outputs_;
  Counter& steps_;
  Gauge& running_;
  Gauge& waiting_;
  Gauge& queue_depth_;
  Counter& aborts_;
  Family<Counter>& utility_calls_;
  Gauge& sessions_;
  Family<Counter>& loop_seconds_;
  Counter& idle_seconds_;
  Counter& stepping_seconds_;
  Counter& reader_wait_seconds_;
  // Set by AddPrefixCache().
  MetricsRegistry* const registry_;
  Gauge* cache_blocks_ = nullptr;
  Counter* cache_hit_tokens_ = nullptr;
  Counter* cache_miss_tokens_ = nullptr;
  PrefixCacheStats cache_reported_;  // the totals counted so far
};

}  // namespace omnistage

#endif  // OMNISTAGE_STAGE_WORKER_WORKER_METRICS_H_
