// DemandSampler: when the stages' autoscaling signals are sampled
// (stage_demand.h, docs/observability.md "Autoscaling signals"), and when the
// pipeline has gone idle.
//
// It samples every scaling.sample_interval what `observe` reports. Idle
// (nothing in flight or queued) with nothing measured left to decay, or idle
// while draining, it pauses until the next arrival. At the first sample that
// finds the pipeline idle with nothing admitted since the sample before, it
// runs on_idle, once per idle period (the orchestrator gives its allocator's
// free memory back then).
//
// Not thread-safe: runs on the scheduler's loop.
#ifndef OMNISTAGE_ORCHESTRATOR_CORE_DEMAND_SAMPLER_H_
#define OMNISTAGE_ORCHESTRATOR_CORE_DEMAND_SAMPLER_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "common/liveness.h"
#include "common/scheduler.h"
#include "orchestrator/config/pipeline_config.h"
#include "orchestrator/routing/stage_demand.h"

namespace omnistage {

class DemandSampler {
 public:
  // What one sample sees of the pipeline.
  struct Observed {
    // Per stage; stage 0's `waiting` counts the admission queue too.
    std::vector<StageLoad> loads;
    // Nothing in flight and nothing queued.
    bool idle = false;
    bool draining = false;
  };

  // Samples `stages` stages per `scaling`, the first time one interval from
  // now.
  DemandSampler(int stages, const ScalingConfig& scaling, Scheduler* scheduler,
                std::function<Observed()> observe);
  ~DemandSampler();
  DemandSampler(const DemandSampler&) = delete;
  DemandSampler& operator=(const DemandSampler&) = delete;

  // A request was admitted (queued ones too): counted as an arrival, and
  // sampling resumes if it had paused.
  void Arrived();
  void set_on_idle(std::function<void()> on_idle) { on_idle_ = std::move(on_idle); }
  // The signals as of the last sample.
  const StageDemand& demand() const { return demand_; }
  // Whether a sample is due (false while paused).
  bool sampling() const { return timer_ != 0; }

 private:
  void Sample();
  void Arm();

  const absl::Duration interval_;
  Scheduler* const scheduler_;
  const std::function<Observed()> observe_;
  StageDemand demand_;
  Scheduler::TimerId timer_ = 0;
  // Requests admitted since start, and as of the last sample.
  uint64_t arrivals_ = 0;
  uint64_t arrivals_sampled_ = 0;
  // on_idle_ ran since the last arrival.
  bool idle_heard_ = false;
  std::function<void()> on_idle_;
  Liveness alive_;
};

}  // namespace omnistage

#endif  // OMNISTAGE_ORCHESTRATOR_CORE_DEMAND_SAMPLER_H_
