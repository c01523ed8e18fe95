// StageDemand: each stage's autoscaling signal (docs/observability.md,
// "Autoscaling signals"): how saturated the stage is now, and how many
// replicas the pipeline's measured demand needs there.
//
// The count comes from Little's law per stage, not from the stage's queue:
//   slot seconds per request  S_s = busy slot seconds / requests passing
// where requests passing is the mean of those entering and those leaving:
// while the load grows, the busy slots lead the requests leaving by a slot
// time and trail those entering by as much, so the mean cancels the lag to
// first order (a linear ramp exactly), and a growing stage is not credited
// with slot times it does not have.
//   requests offered          L_s = pipeline arrivals * (stage entries / stage 0 entries)
//   demand_replicas           D_s = L_s * S_s / (slots per replica * target utilization)
// Arrivals count every request admitted, also those the admission queue
// holds, and the entry ratio is the share of requests that reach the stage;
// both are throttled alike when an earlier stage is the bottleneck, so every
// stage's count follows what the clients ask for, not what got through.
// That keeps the ratio between stages right while the pipeline is short of
// replicas anywhere, and a queue that grows makes no count run away. Until a
// stage has seen a request leave, D_s is what it holds and what waits for it.
// Every mean is an exponentially weighted average with time constant
// `window`, updated by Sample() (the core calls it every `sample_interval`).
//
// demand_replicas adds up across orchestrators (each measures its own
// requests); recommended_replicas is its ceiling, at least 1.
//
// Audio streams need a stage's output at real time, which its slots do not
// say: a stage may hold 32 requests and make audio for 20 at real time. With
// a stage's audio streams per replica measured (StageAudioLoad.per_replica,
// at most its slots), its audio capacity is that times its live replicas, and
//   audio_demand_replicas     A_s = offered audio streams / (per replica * target utilization)
// A stage fed by a slower one shows at most that one's capacity, so only the
// stage that limits the pipeline's audio asks for replicas by it: the first,
// in pipeline order, within 10% of the lowest capacity. Its
// recommended_replicas is the ceiling of max(D_s, A_s).
//
// Not thread-safe: owned by the orchestrator's event loop.
#ifndef OMNISTAGE_ORCHESTRATOR_ROUTING_STAGE_DEMAND_H_
#define OMNISTAGE_ORCHESTRATOR_ROUTING_STAGE_DEMAND_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/time/time.h"
#include "protos/orchestrator.pb.h"

namespace omnistage {

// A stage's audio streams at a sample (orchestrator/core/stage_audio.h).
struct StageAudioLoad {
  // Requests that want audio the stage holds.
  int requests = 0;
  // The audio streams asking for the stage: those it holds, and its share of
  // the audio requests waiting in the admission queue.
  double offered = 0;
  // The streams one replica holds at real time, once measured.
  std::optional<double> per_replica;
};

// One stage's state at a sample, as its StagePool sees it.
struct StageLoad {
  // Requests bound to alive replicas, within each one's capacity.
  int held = 0;
  // Requests bound beyond a replica's capacity (they wait in the worker),
  // plus, for stage 0, the admission queue.
  int waiting = 0;
  int live_replicas = 0;
  // The alive replicas' capacity together (a replica that reports none
  // counts as holding what it has).
  int capacity = 0;
  // One replica's slots: the alive ones' mean, else the last known, else 1.
  int slots_per_replica = 1;
  // Since the pool began: bindings made (requests entering the stage) and
  // ended (released, evicted or re-bound elsewhere).
  uint64_t entries = 0;
  uint64_t departures = 0;
  // Since the pool began: `held` over time, in slot seconds (a slot busy
  // for a second is one).
  double busy_slot_seconds = 0;
  // Its audio streams (filled in by the core, not the pool).
  StageAudioLoad audio;
};

struct DemandOptions {
  // The share of its slots a replica should hold busy, in (0, 1].
  double target_utilization = 0.8;
  absl::Duration window = absl::Seconds(30);
};

class StageDemand {
 public:
  StageDemand(int stages, DemandOptions options);

  // `arrivals`: requests admitted since start; `loads[s]`: stage s now.
  void Sample(absl::Time now, uint64_t arrivals, const std::vector<StageLoad>& loads);
  // Stage `stage` as of the last Sample (all zeros before the first, but
  // recommended_replicas 1).
  const v1::StageScaling& Signal(int stage) const { return signals_[stage]; }
  size_t stages() const { return signals_.size(); }
  // Nothing measured is left to decay (every average is about 0): sampling
  // may pause until requests come again.
  bool Quiet() const;

 private:
  struct Averages {
    double entries_per_second = 0;
    double departures_per_second = 0;
    double occupied = 0;
    uint64_t last_entries = 0;
    uint64_t last_departures = 0;
    double last_busy = 0;
  };
  void Update(int stage, const StageLoad& load, double alpha, double seconds);
  // The audio half of every stage's signal, once Update ran for each.
  void UpdateAudio(const std::vector<StageLoad>& loads);

  const DemandOptions options_;
  std::vector<Averages> averages_;
  std::vector<v1::StageScaling> signals_;
  double arrivals_per_second_ = 0;
  uint64_t last_arrivals_ = 0;
  absl::Time last_sample_ = absl::InfinitePast();
};

}  // namespace omnistage

#endif  // OMNISTAGE_ORCHESTRATOR_ROUTING_STAGE_DEMAND_H_
