// OnlineRegression: a linear model y ~ w . x learned one observation at a
// time by recursive least squares with forgetting, so it follows a pipeline
// whose speed drifts (the latency predictor's models, latency_predictor.h).
//
//   OnlineRegression model(/*features=*/3);
//   model.Learn({1, running, input_kunits}, seconds);
//   double predicted = model.Predict({1, running, input_kunits});
//
// Each call is O(k^2) for k features (k is 2 or 3 here): cheap enough for
// every admission and pick. Not thread-safe.
#ifndef OMNISTAGE_ORCHESTRATOR_CORE_ONLINE_REGRESSION_H_
#define OMNISTAGE_ORCHESTRATOR_CORE_ONLINE_REGRESSION_H_

#include <cstdint>
#include <vector>

namespace omnistage {

class OnlineRegression {
 public:
  // What a prediction may not go below.
  enum class Floor {
    // The smallest y learned, and 0 (a time: a line fitted to few or noisy
    // points may reach below what was ever seen, even below 0).
    kSmallestLearned,
    // None (a correction, which may be negative).
    kNone,
  };

  // `features`: the length of every x (the first usually a constant 1);
  // `forgetting`: each observation's weight relative to the next one's, in
  // (0, 1] (0.98: the last ~50 observations count).
  explicit OnlineRegression(int features, double forgetting = 0.98,
                            Floor floor = Floor::kSmallestLearned);

  // The model's y for `x`, above its floor; 0 before any observation.
  double Predict(const std::vector<double>& x) const;
  // Learns that `x` gave `y`.
  void Learn(const std::vector<double>& x, double y);
  // Observations learned so far.
  int64_t samples() const { return samples_; }

 private:
  const int k_;
  const double forgetting_;
  const Floor floor_;
  std::vector<double> w_;
  // The inverse correlation matrix, k x k, row-major.
  std::vector<double> p_;
  int64_t samples_ = 0;
  double min_y_ = 0;
};

}  // namespace omnistage

#endif  // OMNISTAGE_ORCHESTRATOR_CORE_ONLINE_REGRESSION_H_
