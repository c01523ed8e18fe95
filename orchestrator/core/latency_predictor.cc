#include "orchestrator/core/latency_predictor.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace omnistage {
namespace {

std::vector<double> LeadX(const LeadFeatures& features) {
  return {1.0, features.running, features.prompt_kbytes, features.until_step};
}

}  // namespace

bool LatencyPredictor::CorrectionKnown() const {
  return wait_by_estimate_.has_value() && wait_by_estimate_->samples() >= kMinSamples;
}

bool LatencyPredictor::CorrectionCovers(double estimate) const {
  if (!CorrectionKnown()) return false;
  const auto [low, high] = std::minmax_element(recent_estimates_.begin(), recent_estimates_.end());
  return estimate >= *low && estimate <= *high;
}

std::optional<double> LatencyPredictor::PredictWait(int ahead, double estimate) const {
  if (estimate >= 0) {
    if (CorrectionCovers(estimate) && corrected_error_ >= 0 && corrected_error_ < estimate_error_) {
      return wait_by_estimate_->Predict({1.0, estimate});
    }
    return estimate;
  }
  if (!wait_by_ahead_.has_value() || wait_by_ahead_->samples() < kMinSamples) return std::nullopt;
  return wait_by_ahead_->Predict({1.0, static_cast<double>(ahead)});
}

void LatencyPredictor::LearnWait(int ahead, double estimate, double seconds) {
  if (!wait_by_ahead_.has_value()) wait_by_ahead_.emplace(2);
  wait_by_ahead_->Learn({1.0, static_cast<double>(ahead)}, seconds);
  if (estimate < 0) return;
  auto follow = [](double* mean, double error) {
    *mean = *mean < 0 ? error : *mean + kErrorWeight * (error - *mean);
  };
  follow(&estimate_error_, std::abs(estimate - seconds));
  if (CorrectionKnown()) {
    follow(&corrected_error_, std::abs(wait_by_estimate_->Predict({1.0, estimate}) - seconds));
  }
  if (!wait_by_estimate_.has_value()) wait_by_estimate_.emplace(2);
  wait_by_estimate_->Learn({1.0, estimate}, seconds);
  recent_estimates_.push_back(estimate);
  if (recent_estimates_.size() > kRecentEstimates) recent_estimates_.pop_front();
}

std::optional<double> LatencyPredictor::PredictLead(int stage, int replica, Lead lead,
                                                    const LeadFeatures& features) const {
  auto it = leads_.find({stage, replica, lead});
  if (it == leads_.end() || it->second.samples() < kMinSamples) return std::nullopt;
  return it->second.Predict(LeadX(features));
}

void LatencyPredictor::LearnLead(int stage, int replica, Lead lead, const LeadFeatures& features,
                                 double seconds) {
  auto it = leads_.try_emplace({stage, replica, lead}, 4).first;
  it->second.Learn(LeadX(features), seconds);
}

}  // namespace omnistage
