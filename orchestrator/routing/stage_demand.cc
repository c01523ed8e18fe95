#include "orchestrator/routing/stage_demand.h"

#include <algorithm>
#include <cmath>

namespace omnistage {
namespace {

// Rates below this are no traffic (one request an hour, say).
constexpr double kNoRate = 1e-4;

// Stages whose audio capacities are within this share of the lowest are one
// limit: the first of them (a stage fed by the limiting one measures about
// the same capacity).
constexpr double kSameLimit = 0.1;

// The replicas that `replicas` asks for: its ceiling, at least 1 (a hair of
// slack so that exactly 2.0 asks for 2, not 3).
int Recommended(double replicas) {
  return std::max(1, static_cast<int>(std::ceil(replicas - 1e-6)));
}

// Moves `average` towards `sample` by `alpha`.
void Towards(double sample, double alpha, double* average) {
  *average += alpha * (sample - *average);
}

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
  UpdateAudio(loads);
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
  signal.set_recommended_replicas(Recommended(replicas));
}

void StageDemand::UpdateAudio(const std::vector<StageLoad>& loads) {
  const size_t stages = std::min(loads.size(), signals_.size());
  std::optional<double> lowest;
  for (size_t s = 0; s < stages; ++s) {
    const StageLoad& load = loads[s];
    v1::StageScaling& signal = signals_[s];
    signal.set_audio_requests(load.audio.requests);
    signal.set_audio_capacity_known(false);
    signal.set_audio_stream_capacity(0);
    signal.set_audio_demand_replicas(0);
    signal.set_audio_limited(false);
    if (!load.audio.per_replica.has_value()) continue;
    // A replica holds no more streams than it has slots.
    const double per_replica =
        std::min(*load.audio.per_replica, static_cast<double>(std::max(1, load.slots_per_replica)));
    signal.set_audio_capacity_known(true);
    signal.set_audio_stream_capacity(per_replica * load.live_replicas);
    if (per_replica > 0) {
      signal.set_audio_demand_replicas(load.audio.offered /
                                       (per_replica * options_.target_utilization));
    }
    if (!lowest.has_value() || signal.audio_stream_capacity() < *lowest) {
      lowest = signal.audio_stream_capacity();
    }
  }
  if (!lowest.has_value()) return;
  for (size_t s = 0; s < stages; ++s) {
    v1::StageScaling& signal = signals_[s];
    if (!signal.audio_capacity_known() ||
        signal.audio_stream_capacity() > *lowest * (1 + kSameLimit)) {
      continue;
    }
    signal.set_audio_limited(true);
    signal.set_recommended_replicas(
        Recommended(std::max(signal.demand_replicas(), signal.audio_demand_replicas())));
    return;
  }
}

}  // namespace omnistage
