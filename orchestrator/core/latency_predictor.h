// LatencyPredictor: how long parts of a request will take, learned online
// from what the orchestrator observes (docs/architecture.md, "Latency
// objectives"), one model per part:
// - the admission queue: the wait of a request that found `ahead` requests
//   to leave before it, and, where the caller could estimate it from the
//   requests running on stage 0 (their predicted ends), that estimate: the
//   model corrects the estimate's bias;
// - per stage and replica, a stage's lead: from the request's start there to
//   its first output (what the next stage streams from, or the client
//   gets), and to its end (what an on_finish next stage waits for), by the
//   requests on the replica at the start and the prompt's size.
// A model answers once it has learned kMinSamples observations.
//
//   LatencyPredictor predictor;
//   predictor.LearnLead(0, replica, Lead::kFirstOutput, {running, kunits}, 0.042);
//   std::optional<double> s = predictor.PredictLead(0, replica, Lead::kFirstOutput, features);
//
// Not thread-safe: owned by the orchestrator's loop.
#ifndef OMNISTAGE_ORCHESTRATOR_CORE_LATENCY_PREDICTOR_H_
#define OMNISTAGE_ORCHESTRATOR_CORE_LATENCY_PREDICTOR_H_

#include <map>
#include <optional>
#include <tuple>

#include "orchestrator/core/online_regression.h"

namespace omnistage {

// What a stage's lead depends on, as known when the request starts there.
struct LeadFeatures {
  // Requests on the replica (every orchestrator's, as far as known).
  double running = 0;
  // The request's prompt, in thousands of bytes.
  double prompt_kbytes = 0;
};

class LatencyPredictor {
 public:
  static constexpr int kMinSamples = 3;
  enum class Lead { kFirstOutput, kDone };

  // The admission queue's wait for a request that finds `ahead` to leave
  // before it, with the caller's `estimate` (negative: none).
  std::optional<double> PredictWait(int ahead, double estimate) const;
  void LearnWait(int ahead, double estimate, double seconds);

  // Stage `stage`'s lead on replica `replica`.
  std::optional<double> PredictLead(int stage, int replica, Lead lead,
                                    const LeadFeatures& features) const;
  void LearnLead(int stage, int replica, Lead lead, const LeadFeatures& features, double seconds);

 private:
  std::optional<OnlineRegression> wait_by_ahead_;
  std::optional<OnlineRegression> wait_by_estimate_;
  std::map<std::tuple<int, int, Lead>, OnlineRegression> leads_;
};

}  // namespace omnistage

#endif  // OMNISTAGE_ORCHESTRATOR_CORE_LATENCY_PREDICTOR_H_
