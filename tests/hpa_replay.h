// HpaReplay: what Kubernetes' HorizontalPodAutoscaler (and KEDA, which feeds
// it) decides for one Deployment from an external metric with an
// AverageValue target, replayed by a test against a running pipeline:
//
//   desired = ceil(metric / target)                         (AverageValue)
//   no change while |metric / (current * target) - 1| <= tolerance
//   scaling down: the highest desired count of the last
//     `down_stabilization` (the behaviour's stabilizationWindowSeconds)
//   clamped to [min_replicas, max_replicas]
//
// That is the documented algorithm (kubernetes.io, "Horizontal Pod
// Autoscaling", "Algorithm details" and "Stabilization window"), with the
// loop's period and the windows shortened for a test.
#ifndef OMNISTAGE_TESTS_HPA_REPLAY_H_
#define OMNISTAGE_TESTS_HPA_REPLAY_H_

#include <algorithm>
#include <cmath>
#include <deque>
#include <utility>

#include "absl/time/time.h"

namespace omnistage {

struct HpaOptions {
  double target = 1.0;  // the metric's AverageValue target
  double tolerance = 0.1;
  absl::Duration down_stabilization = absl::Minutes(5);
  int min_replicas = 1;
  int max_replicas = 10;
};

class HpaReplay {
 public:
  explicit HpaReplay(HpaOptions options) : options_(options) {}

  // One pass of the loop at `now`, with `current` replicas and the metric's
  // value (summed over the pods it is read from); returns the new count.
  int Decide(absl::Time now, int current, double metric) {
    int desired = current;
    const double ratio = metric / (std::max(current, 1) * options_.target);
    if (std::abs(ratio - 1) > options_.tolerance) {
      desired = static_cast<int>(std::ceil(metric / options_.target - 1e-9));
    }
    desired = std::clamp(desired, options_.min_replicas, options_.max_replicas);
    recent_.emplace_back(now, desired);
    while (!recent_.empty() && recent_.front().first < now - options_.down_stabilization) {
      recent_.pop_front();
    }
    if (desired >= current) return desired;
    // Down: no lower than anything recommended within the window.
    int highest = desired;
    for (const auto& [when, count] : recent_) highest = std::max(highest, count);
    return std::min(current, highest);
  }

 private:
  const HpaOptions options_;
  std::deque<std::pair<absl::Time, int>> recent_;
};

}  // namespace omnistage

#endif  // OMNISTAGE_TESTS_HPA_REPLAY_H_
