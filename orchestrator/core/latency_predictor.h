// LatencyPredictor: how long parts of a request will take, learned online
// from what the orchestrator observes (docs/architecture.md, "Latency
// objectives"), one model per part:
// - the admission queue: the wait of a request that found `ahead` requests
//   to leave before it, and, where the caller could estimate it from the
//   requests running on stage 0 (their predicted ends), that estimate: the
//   model corrects the estimate's bias where it learned and was right, and
//   the estimate answers alone elsewhere (a line learned at one load can
//   stray far at another);
// - per stage and replica, a stage's lead: from the request's start there to
//   its first output (what the next stage streams from, or the client
//   gets), and to its end (what an on_finish next stage waits for), by the
//   requests on the replica at the start, the prompt's size and how long
//   the engine's current step still ran then (step_cadence.h). Where the
//   engine's step period is known, a first output is predicted as what the
//   steps say (the rest of the current step and one whole step: a request
//   joins the next step) plus what the model learned comes beyond that; and
//   where the requests on the replica lie outside what the model learned
//   from lately (a quiet replica after a burst kept it full, or the
//   reverse), as what the steps say alone: a line fitted at one load can
//   stray far at another.
// A model answers once it has learned kMinSamples observations.
//
//   LatencyPredictor predictor;
//   predictor.LearnLead(0, replica, Lead::kFirstOutput, {running, kbytes, 0.012}, 0.042);
//   std::optional<double> s = predictor.PredictLead(0, replica, Lead::kFirstOutput, features);
//
// Not thread-safe: owned by the orchestrator's loop.
#ifndef OMNISTAGE_ORCHESTRATOR_CORE_LATENCY_PREDICTOR_H_
#define OMNISTAGE_ORCHESTRATOR_CORE_LATENCY_PREDICTOR_H_

#include <cstddef>
#include <deque>
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
  // Seconds until the engine's current step ends, when the request gets
  // there: it joins the next one (0: the engine is idle, or its steps are
  // not known).
  double until_step = 0;
  // The engine's step period in seconds (0: not known).
  double step_period = 0;
};

class LatencyPredictor {
 public:
  static constexpr int kMinSamples = 3;
  static constexpr size_t kRecentEstimates = 50;
  enum class Lead { kFirstOutput, kDone };

  // The admission queue's wait for a request that finds `ahead` to leave
  // before it, with the caller's `estimate` (negative: none). An estimate
  // is corrected by what the waits with one were where that was nearer the
  // recent waits than the estimates themselves, and the estimate is among
  // the last kRecentEstimates learned; otherwise it is taken as it is.
  std::optional<double> PredictWait(int ahead, double estimate) const;
  void LearnWait(int ahead, double estimate, double seconds);

  // Stage `stage`'s lead on replica `replica`. A first output's, with a
  // known step period: until_step plus step_period, plus what the model
  // learned comes beyond them where it learned `features.running` among its
  // last kRecentEstimates observations.
  std::optional<double> PredictLead(int stage, int replica, Lead lead,
                                    const LeadFeatures& features) const;
  void LearnLead(int stage, int replica, Lead lead, const LeadFeatures& features, double seconds);

 private:
  // Each recent error's weight in a mean of them.
  static constexpr double kErrorWeight = 0.2;
  // The estimates' correction has learned enough to answer, and for
  // `estimate`: it is within the range of the recent ones.
  bool CorrectionKnown() const;
  bool CorrectionCovers(double estimate) const;

  std::optional<OnlineRegression> wait_by_ahead_;
  std::optional<OnlineRegression> wait_by_estimate_;
  // The recent mean absolute error, in seconds, of the estimates as they
  // are and as corrected (-1: none yet).
  double estimate_error_ = -1;
  double corrected_error_ = -1;
  std::deque<double> recent_estimates_;
  // A lead's models and the requests running at its recent observations.
  struct LeadModel {
    // The lead itself.
    OnlineRegression model{4};
    // A first output's lead beyond what the steps say (until_step plus
    // step_period), learned where the step period was known.
    OnlineRegression beyond_steps{4, 0.98, OnlineRegression::Floor::kNone};
    // Of a first output's lead only.
    std::deque<double> recent_running;
    bool Covers(double running) const;
  };
  std::map<std::tuple<int, int, Lead>, LeadModel> leads_;
};

}  // namespace omnistage

#endif  // OMNISTAGE_ORCHESTRATOR_CORE_LATENCY_PREDICTOR_H_
