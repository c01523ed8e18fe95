#include "stage_worker/engines/speech/resampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace omnistage {
namespace {

constexpr double kPi = 3.14159265358979323846;
// Zero crossings of the sinc on each side: the filter's length, and so its
// steepness, in units of the lower rate's sample period.
constexpr int kZeroCrossings = 16;
// The cut-off when lowering the rate, as a fraction of the new Nyquist
// frequency: the window's transition band lies below it, not across it.
constexpr double kDownCutoff = 0.92;
// Phases kept in a table at most (16 kHz from 22.05 kHz has 320, from 44.1
// kHz 160; a rate prime to 16000 has 16000, computed per sample).
constexpr int64_t kMaxTablePhases = 4096;

double Sinc(double x) { return x == 0 ? 1.0 : std::sin(kPi * x) / (kPi * x); }

// Blackman window over [-1, 1].
double Window(double x) {
  if (x <= -1 || x >= 1) return 0;
  return 0.42 + 0.5 * std::cos(kPi * x) + 0.08 * std::cos(2 * kPi * x);
}

}  // namespace

StreamResampler::StreamResampler(int from_hz, int to_hz)
    : from_hz_(from_hz),
      to_hz_(to_hz),
      cutoff_(to_hz < from_hz ? kDownCutoff * to_hz / from_hz : 1.0),
      half_width_(static_cast<int>(std::ceil(kZeroCrossings / cutoff_))) {
  if (from_hz_ == to_hz_) return;
  phase_step_ = std::gcd(static_cast<int64_t>(from_hz_), static_cast<int64_t>(to_hz_));
  const int64_t phases = to_hz_ / phase_step_;
  if (phases > kMaxTablePhases) return;
  table_.resize(static_cast<size_t>(phases * 2 * half_width_));
  for (int64_t p = 0; p < phases; ++p) {
    Weights(p * phase_step_, &table_[static_cast<size_t>(p * 2 * half_width_)]);
  }
}

void StreamResampler::Weights(int64_t phase, double* weights) const {
  const double fraction = static_cast<double>(phase) / to_hz_;
  double sum = 0;
  for (int k = 0; k < 2 * half_width_; ++k) {
    // Input index - half_width_ + 1 + k lies this far before the position.
    const double distance = fraction + (half_width_ - 1 - k);
    weights[k] = cutoff_ * Sinc(cutoff_ * distance) * Window(distance / half_width_);
    sum += weights[k];
  }
  for (int k = 0; k < 2 * half_width_; ++k) weights[k] /= sum;
}

void StreamResampler::Push(absl::Span<const int16_t> samples, std::vector<int16_t>* out) {
  input_count_ += static_cast<int64_t>(samples.size());
  if (from_hz_ == to_hz_) {
    out->insert(out->end(), samples.begin(), samples.end());
    next_output_ = input_count_;
    return;
  }
  history_.insert(history_.end(), samples.begin(), samples.end());
  Produce(/*at_end=*/false, out);
}

void StreamResampler::Flush(std::vector<int16_t>* out) {
  if (from_hz_ != to_hz_) Produce(/*at_end=*/true, out);
}

void StreamResampler::Produce(bool at_end, std::vector<int16_t>* out) {
  const int64_t total = input_count_ * to_hz_ / from_hz_;  // as ResampledCount()
  std::vector<double> computed(table_.empty() ? static_cast<size_t>(2 * half_width_) : 0);
  for (; next_output_ < total; ++next_output_) {
    const int64_t position = next_output_ * from_hz_;
    const int64_t index = position / to_hz_;
    const int64_t phase = position % to_hz_;
    if (!at_end && index + half_width_ >= input_count_) break;  // needs input to come
    const double* weights;
    if (table_.empty()) {
      Weights(phase, computed.data());
      weights = computed.data();
    } else {
      weights = &table_[static_cast<size_t>(phase / phase_step_ * 2 * half_width_)];
    }
    double sum = 0;
    const int64_t first = index - half_width_ + 1;
    for (int k = 0; k < 2 * half_width_; ++k) {
      const int64_t i = first + k - history_start_;
      if (i < 0 || i >= static_cast<int64_t>(history_.size())) continue;  // silence
      sum += weights[k] * history_[static_cast<size_t>(i)];
    }
    out->push_back(static_cast<int16_t>(std::clamp(std::lround(sum), -32768L, 32767L)));
  }
  // Drop the input no later output sample reaches.
  const int64_t keep_from =
      std::max<int64_t>(0, next_output_ * from_hz_ / to_hz_ - half_width_ + 1);
  if (keep_from > history_start_) {
    const int64_t drop =
        std::min<int64_t>(keep_from - history_start_, static_cast<int64_t>(history_.size()));
    history_.erase(history_.begin(), history_.begin() + drop);
    history_start_ += drop;
  }
}

}  // namespace omnistage
