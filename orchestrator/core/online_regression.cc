#include "orchestrator/core/online_regression.h"

#include <algorithm>
#include <cmath>

namespace omnistage {
namespace {

// The initial inverse correlation: large, so the first observations decide
// (a feature in seconds varies by hundredths: 1e4 still pulled its weight
// toward 0 by a sixth after a few observations).
constexpr double kInitial = 1e6;

}  // namespace

OnlineRegression::OnlineRegression(int features, double forgetting, Floor floor)
    : k_(std::max(features, 1)),
      forgetting_(std::clamp(forgetting, 0.5, 1.0)),
      floor_(floor),
      w_(k_, 0.0),
      p_(static_cast<size_t>(k_) * k_, 0.0) {
  for (int i = 0; i < k_; ++i) p_[i * k_ + i] = kInitial;
}

double OnlineRegression::Predict(const std::vector<double>& x) const {
  double y = 0;
  for (int i = 0; i < k_ && i < static_cast<int>(x.size()); ++i) y += w_[i] * x[i];
  return floor_ == Floor::kNone ? y : std::max(y, min_y_);
}

void OnlineRegression::Learn(const std::vector<double>& x_in, double y) {
  if (!std::isfinite(y)) return;
  std::vector<double> x(k_, 0.0);
  for (int i = 0; i < k_ && i < static_cast<int>(x_in.size()); ++i) x[i] = x_in[i];
  // Px and x'Px.
  std::vector<double> px(k_, 0.0);
  for (int i = 0; i < k_; ++i) {
    for (int j = 0; j < k_; ++j) px[i] += p_[i * k_ + j] * x[j];
  }
  double xpx = 0;
  for (int i = 0; i < k_; ++i) xpx += x[i] * px[i];
  // Forget only while the matrix is bounded: a feature that never varies
  // would otherwise grow its entries without end (wind-up).
  double trace = 0;
  for (int i = 0; i < k_; ++i) trace += p_[i * k_ + i];
  const double lambda = trace < kInitial * k_ ? forgetting_ : 1.0;
  const double denominator = lambda + xpx;
  if (!(denominator > 0) || !std::isfinite(denominator)) return;
  double error = y;
  for (int i = 0; i < k_; ++i) error -= w_[i] * x[i];
  for (int i = 0; i < k_; ++i) w_[i] += px[i] / denominator * error;
  // P = (P - Px x'P / denominator) / lambda; P stays symmetric.
  for (int i = 0; i < k_; ++i) {
    for (int j = 0; j < k_; ++j) {
      p_[i * k_ + j] = (p_[i * k_ + j] - px[i] * px[j] / denominator) / lambda;
    }
  }
  min_y_ = samples_ == 0 ? std::max(y, 0.0) : std::min(min_y_, std::max(y, 0.0));
  ++samples_;
}

}  // namespace omnistage
