#include "orchestrator/routing/stage_demand.h"

#include <algorithm>
#include <cmath>

namespace omnistage {
namespace {

// Rates below this are no traffic (one request an hour, say).
constexpr double kNoRate = 1e-4;

// Moves `average` towards `sample` by `alpha`.
void Towards(double sample, double alpha, double* average) { *average += alpha * (sample - *average); }

}  // namespace

StageDemand::StageDemand(int stages, DemandOptions options)
    : options_(options), averages_(stages), signals_(stages) {
  for (v1::StageScaling& signal : signals_) signal.set_recommended_replicas(1);
}

void StageDemand::Sample(absl::Time now, uint64_t arrivals, const std::vector<StageLoad>& loads) {
  const bool first = last_sample_ == absl::InfinitePast();
  const double seconds = first ? 0 : absl::ToDoubleSeconds(now - last_sample_);
  if (!first && seconds <= 0) return;
  const double alpha = first ? 0 : 1 - std::exp(-seconds / absl::ToDoubleSeconds(options_.window));
  if (!first) Towards((arrivals - last_arrivals_) / seconds, alpha, &arrivals_per_second_);
  last_arrivals_ = arrivals;
  last_sample_ = now;
  for (size_t s = 0; s < loads.size() && s < averages_.size(); ++s) {
    Update(static_cast<int>(s), loads[s], alpha, seconds);
  }
}

bool StageDemand::Quiet() const {
  if (arrivals_per_second_ >= kNoRate) return false;
  for (const Averages& a : averages_) {
    if (a.entries_per_second >= kNoRate || a.departures_per_second >= kNoRate ||
        a.occupied >= kNoRate) {
      return false;
    }
  }
  return true;
}

void StageDemand::Update(int stage, const StageLoad& load, double alpha, double seconds) {
  Averages& a = averages_[stage];
  if (seconds > 0) {
    Towards((load.entries - a.last_entries) / seconds, alpha, &a.entries_per_second);
    Towards((load.departures - a.last_departures) / seconds, alpha, &a.departures_per_second);
    Towards((load.busy_slot_seconds - a.last_busy) / seconds, alpha, &a.occupied);
  }
  a.last_entries = load.entries;
  a.last_departures = load.departures;
  a.last_busy = load.busy_slot_seconds;

  v1::StageScaling& signal = signals_[stage];
  signal.set_held_requests(load.held);
  signal.set_waiting_requests(load.waiting);
  signal.set_live_replicas(load.live_replicas);
  signal.set_capacity(load.capacity);
  const double asked = load.held + load.waiting;
  signal.set_saturation(load.capacity > 0 ? asked / load.capacity : asked);

  // The share of the pipeline's requests that reach this stage.
  const double first_entries = averages_[0].entries_per_second;
  const double share =
      stage == 0 || first_entries < kNoRate ? 1.0 : a.entries_per_second / first_entries;
  const double offered = arrivals_per_second_ * share;
  signal.set_arrivals_per_second(offered);
  double concurrency = asked;
  const double passing = (a.entries_per_second + a.departures_per_second) / 2;
  if (a.departures_per_second >= kNoRate) {
    const double slot_seconds = a.occupied / passing;
    signal.set_slot_seconds_per_request(slot_seconds);
    concurrency = offered * slot_seconds;
  } else {
    signal.set_slot_seconds_per_request(0);
  }
  const double replicas =
      concurrency / (std::max(1, load.slots_per_replica) * options_.target_utilization);
  signal.set_demand_replicas(replicas);
  // A hair of slack so that exactly 2.0 asks for 2, not 3.
  signal.set_recommended_replicas(std::max(1, static_cast<int>(std::ceil(replicas - 1e-6))));
}

}  // namespace omnistage
