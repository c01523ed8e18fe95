#include "orchestrator/core/latency_predictor.h"

#include <vector>

namespace omnistage {
namespace {

std::vector<double> LeadX(const LeadFeatures& features) {
  return {1.0, features.running, features.prompt_kbytes};
}

}  // namespace

std::optional<double> LatencyPredictor::PredictWait(int ahead, double estimate) const {
  if (estimate >= 0 && wait_by_estimate_.has_value() &&
      wait_by_estimate_->samples() >= kMinSamples) {
    return wait_by_estimate_->Predict({1.0, estimate});
  }
  if (!wait_by_ahead_.has_value() || wait_by_ahead_->samples() < kMinSamples) return std::nullopt;
  return wait_by_ahead_->Predict({1.0, static_cast<double>(ahead)});
}

void LatencyPredictor::LearnWait(int ahead, double estimate, double seconds) {
  if (!wait_by_ahead_.has_value()) wait_by_ahead_.emplace(2);
  wait_by_ahead_->Learn({1.0, static_cast<double>(ahead)}, seconds);
  if (estimate < 0) return;
  if (!wait_by_estimate_.has_value()) wait_by_estimate_.emplace(2);
  wait_by_estimate_->Learn({1.0, estimate}, seconds);
}

std::optional<double> LatencyPredictor::PredictLead(int stage, int replica, Lead lead,
                                                    const LeadFeatures& features) const {
  auto it = leads_.find({stage, replica, lead});
  if (it == leads_.end() || it->second.samples() < kMinSamples) return std::nullopt;
  return it->second.Predict(LeadX(features));
}

void LatencyPredictor::LearnLead(int stage, int replica, Lead lead, const LeadFeatures& features,
                                 double seconds) {
  auto it = leads_.try_emplace({stage, replica, lead}, 3).first;
  it->second.Learn(LeadX(features), seconds);
}

}  // namespace omnistage
