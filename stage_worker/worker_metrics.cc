#include "stage_worker/worker_metrics.h"

namespace omnistage {

WorkerMetrics::WorkerMetrics(MetricsRegistry* registry)
    : step_duration_(registry
                         ->AddHistogram("omnistage_worker_step_duration_seconds",
                                        "Time of one engine step.", {}, FineLatencyBuckets())
                         .With({})),
      step_outputs_(registry
                        ->AddHistogram("omnistage_worker_step_requests",
                                       "Requests with output in one engine step (batch size).",
                                       {}, SizeBuckets())
                        .With({})),
      steps_(registry->AddCounter("omnistage_worker_steps_total", "Engine steps taken.").With({})),
      running_(registry
                   ->AddGauge("omnistage_worker_running_requests",
                              "Requests in the engine's batch, after the last step.")
                   .With({})),
      waiting_(registry
                   ->AddGauge("omnistage_worker_waiting_requests",
                              "Requests admitted but waiting for a batch slot or for input.")
                   .With({})),
      queue_depth_(registry
                       ->AddGauge("omnistage_worker_input_queue_depth",
                                  "Messages queued for the busy loop.")
                       .With({})),
      aborts_(registry
                  ->AddCounter("omnistage_worker_aborted_requests_total",
                               "Request ids the engine was told to abort.")
                  .With({})),
      utility_calls_(registry->AddCounter("omnistage_worker_utility_calls_total",
                                          "Utility calls answered, by outcome.", {"outcome"})),
      sessions_(registry
                    ->AddGauge("omnistage_worker_sessions",
                               "Open sessions (one per orchestrator).")
                    .With({})),
      loop_seconds_(registry->AddCounter(
          "omnistage_worker_busy_loop_seconds_total",
          "Time the busy loop spent blocked with nothing to do (state=idle), inside engine "
          "steps (state=stepping), and waiting for a session's reader to catch up before the "
          "next step (state=waiting_for_reader).",
          {"state"})),
      idle_seconds_(loop_seconds_.With({"idle"})),
      stepping_seconds_(loop_seconds_.With({"stepping"})),
      reader_wait_seconds_(loop_seconds_.With({"waiting_for_reader"})),
      registry_(registry) {
  // Both outcomes start at 0 (rate() and absent-series alerts from the first scrape).
  utility_calls_.With({"ok"});
  utility_calls_.With({"error"});
}

void WorkerMetrics::Idle(absl::Duration blocked) {
  idle_seconds_.Increment(absl::ToDoubleSeconds(blocked));
}

void WorkerMetrics::WaitedForReaders(absl::Duration waited) {
  reader_wait_seconds_.Increment(absl::ToDoubleSeconds(waited));
}

void WorkerMetrics::Stepped(absl::Duration took, size_t outputs, EngineLoad load) {
  const double seconds = absl::ToDoubleSeconds(took);
  step_duration_.Observe(seconds);
  stepping_seconds_.Increment(seconds);
  step_outputs_.Observe(static_cast<double>(outputs));
  steps_.Increment();
  SetLoad(load);
}

void WorkerMetrics::AbortApplied(size_t ids, EngineLoad load) {
  aborts_.Increment(static_cast<double>(ids));
  SetLoad(load);
}

void WorkerMetrics::UtilityDone(bool ok) { utility_calls_.With({ok ? "ok" : "error"}).Increment(); }

void WorkerMetrics::AddPrefixCache(PrefixCacheLayout layout) {
  cache_blocks_ = &registry_
                       ->AddGauge("omnistage_worker_prefix_cache_blocks",
                                  "Blocks the engine's prefix cache holds, after the last step.")
                       .With({});
  registry_
      ->AddGauge("omnistage_worker_prefix_cache_capacity_blocks",
                 "Blocks the engine's prefix cache holds at most.")
      .With({})
      .Set(layout.capacity_blocks);
  Family<Counter>& tokens = registry_->AddCounter(
      "omnistage_worker_prefix_cache_tokens_total",
      "Input tokens the engine found in its prefix cache (result=hit) or prefilled "
      "(result=miss).",
      {"result"});
  cache_hit_tokens_ = &tokens.With({"hit"});
  cache_miss_tokens_ = &tokens.With({"miss"});
}

void WorkerMetrics::SetPrefixCache(const PrefixCacheStats& stats) {
  cache_blocks_->Set(stats.blocks);
  cache_hit_tokens_->Increment(static_cast<double>(stats.hit_tokens - cache_reported_.hit_tokens));
  cache_miss_tokens_->Increment(
      static_cast<double>(stats.miss_tokens - cache_reported_.miss_tokens));
  cache_reported_ = stats;
}

void WorkerMetrics::SetLoad(EngineLoad load) {
  running_.Set(load.running);
  waiting_.Set(load.waiting);
}

}  // namespace omnistage
