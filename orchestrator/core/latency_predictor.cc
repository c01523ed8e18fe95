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

bool LatencyPredictor::LeadModel::Covers(double running) const {
  if (recent_running.empty()) return false;
  const auto [low, high] = std::minmax_element(recent_running.begin(), recent_running.end());
  return running >= *low && running <= *high;
}

std::optional<double> LatencyPredictor::PredictLead(int stage, int replica, Lead lead,
                                                    const LeadFeatures& features) const {
  auto it = leads_.find({stage, replica, lead});
  if (it == leads_.end() || it->second.model.samples() < kMinSamples) return std::nullopt;
  const LeadModel& known = it->second;
  if (lead == Lead::kFirstOutput && features.step_period > 0) {
    const double steps = features.until_step + features.step_period;
    if (!known.Covers(features.running) || known.beyond_steps.samples() < kMinSamples) {
      return steps;
    }
    return std::max(0.0, steps + known.beyond_steps.Predict(LeadX(features)));
  }
  return known.model.Predict(LeadX(features));
}

void LatencyPredictor::LearnLead(int stage, int replica, Lead lead, const LeadFeatures& features,
                                 double seconds) {
  LeadModel& known = leads_[{stage, replica, lead}];
  known.model.Learn(LeadX(features), seconds);
  if (lead != Lead::kFirstOutput) return;
  if (features.step_period > 0) {
    known.beyond_steps.Learn(LeadX(features), seconds - features.until_step - features.step_period);
  }
  known.recent_running.push_back(features.running);
  if (known.recent_running.size() > kRecentEstimates) known.recent_running.pop_front();
}

}  // namespace omnistage
