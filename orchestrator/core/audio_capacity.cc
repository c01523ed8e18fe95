#include "orchestrator/core/audio_capacity.h"

#include <algorithm>
#include <cmath>

namespace omnistage {
namespace {

// The samples' streams must spread at least this much (their standard
// deviation) for a slope to mean anything.
constexpr double kMinStreamsSpread = 1.0;

}  // namespace

void AudioCapacity::Sample(double load, int streams, double audio_seconds,
                           absl::Duration interval) {
  const double fade = std::exp(-absl::ToDoubleSeconds(interval) / absl::ToDoubleSeconds(window_));
  w_ *= fade;
  wx_ *= fade;
  wy_ *= fade;
  wxx_ *= fade;
  wxy_ *= fade;
  if (!(load > 0) || streams <= 0 || !(audio_seconds > 0)) return;
  const double x = load;
  const double y = streams * absl::ToDoubleSeconds(interval) / audio_seconds;
  last_y_ = y;
  // Weighted by its load: a sample of many streams averages more of them.
  const double weight = x;
  w_ += weight;
  wx_ += weight * x;
  wy_ += weight * y;
  wxx_ += weight * x * x;
  wxy_ += weight * x * y;
  const double mean_x = wx_ / w_;
  const double mean_y = wy_ / w_;
  const double var_x = wxx_ / w_ - mean_x * mean_x;
  if (var_x < kMinStreamsSpread * kMinStreamsSpread) return;
  const double slope = (wxy_ / w_ - mean_x * mean_y) / var_x;
  if (!(slope > 0)) return;
  const double intercept = mean_y - slope * mean_x;
  streams_ = std::max(0.0, (1 - intercept) / slope);
}

}  // namespace omnistage
