#include "orchestrator/core/demand_sampler.h"

#include <utility>

namespace omnistage {
namespace {

DemandOptions DemandOptionsFor(const ScalingConfig& scaling) {
  DemandOptions options;
  options.target_utilization = scaling.target_utilization_percent / 100.0;
  options.window = scaling.window;
  return options;
}

}  // namespace

DemandSampler::DemandSampler(int stages, const ScalingConfig& scaling, Scheduler* scheduler,
                             std::function<Observed()> observe)
    : interval_(scaling.sample_interval),
      scheduler_(scheduler),
      observe_(std::move(observe)),
      demand_(stages, DemandOptionsFor(scaling)) {
  Arm();
}

DemandSampler::~DemandSampler() {
  alive_.End();
  scheduler_->Cancel(timer_);
}

void DemandSampler::Arrived() {
  ++arrivals_;
  if (timer_ == 0) Arm();  // Paused while idle.
}

void DemandSampler::Arm() {
  timer_ = scheduler_->PostAfter(interval_, [this, alive = alive_.watch()] {
    if (alive) Sample();
  });
}

void DemandSampler::Sample() {
  timer_ = 0;
  const Observed observed = observe_();
  demand_.Sample(scheduler_->Now(), arrivals_, observed.loads);
  // Idle, with nothing left to decay (or draining): sampling pauses until
  // the next request.
  if (!(observed.idle && (demand_.Quiet() || observed.draining))) Arm();
  // Idle since the sample before: once per idle period.
  const bool settled = observed.idle && arrivals_ == arrivals_sampled_;
  arrivals_sampled_ = arrivals_;
  if (!settled) {
    idle_heard_ = false;
  } else if (!idle_heard_) {
    idle_heard_ = true;
    if (on_idle_) on_idle_();
  }
}

}  // namespace omnistage
