// ObjectivePlanner: what requests' latency objectives decide, from the
// latency predictor (latency_predictor.h; docs/architecture.md, "Latency
// objectives"):
// - at admission, each objective's time predicted (the admission queue's
//   wait, then each stage's lead on its best live replica up to the stage
//   that gives that output), and a sheddable request predicted to miss one
//   refused at once (RESOURCE_EXHAUSTED with a retry hint), and one that
//   waited in the queue until it would miss ended as it leaves;
// - at a pick, the replicas predicted to miss the request's deadlines
//   (avoided while another is not);
// - as the request runs, what the predictor learns: its wait, each stage's
//   leads on the replica it ran on;
// - as it ends, the prediction in its record, the prediction's error, and
//   why each objective it missed was missed ("predicted", "queued",
//   "slow_replica", "mispredicted", "unpredicted").
//
//   if (absl::Status s = planner.Admit(r, ahead); !s.ok()) ... refuse
//   if (auto shed = planner.ShedAtStart(r)) ... end it (out of the queue)
//   context.avoid = planner.Avoid(r, stage);
//   planner.Step(stage, replica, outputs.step(), busy); // each step event
//   planner.Started(r, stage);                 // after the send
//   planner.Output(r, stage, replica, output); // each output
//   planner.Judge(r, &record);                 // after JudgeObjectives
//
// Not thread-safe: owned by the orchestrator's loop.
#ifndef OMNISTAGE_ORCHESTRATOR_CORE_OBJECTIVE_PLANNER_H_
#define OMNISTAGE_ORCHESTRATOR_CORE_OBJECTIVE_PLANNER_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "orchestrator/core/core_parts.h"
#include "orchestrator/core/latency_predictor.h"
#include "orchestrator/core/objective_metrics.h"
#include "orchestrator/core/request_table.h"
#include "orchestrator/core/step_cadence.h"
#include "protos/orchestrator.pb.h"
#include "protos/stage_worker.pb.h"

namespace omnistage {

class ObjectivePlanner {
 public:
  // `metrics` (not owned) counts the prediction errors and misses.
  ObjectivePlanner(CoreParts core, ObjectiveMetrics* metrics);

  // Predicts `r`'s objectives (its forecast) as it is admitted with a prompt
  // of `prompt_bytes`, finding `ahead` requests in the admission queue due
  // to leave before it (-1: it starts at once). RESOURCE_EXHAUSTED (with a
  // retry hint) for a sheddable request predicted to miss one (counted as a
  // shed).
  absl::Status Admit(InFlightRequest& r, size_t prompt_bytes, int ahead);
  // As `r` leaves the admission queue: for a sheddable request now predicted
  // to miss an objective, the error that ends it instead of starting it
  // (counted as a shed).
  std::optional<v1::Error> ShedAtStart(const InFlightRequest& r);
  // The live replicas of `stage` predicted to make `r` miss a deadline; empty
  // when none is, or every one is.
  std::vector<int> Avoid(const InFlightRequest& r, int stage) const;
  // Replica `replica` of `stage` sent the event of engine step `step`,
  // after which its engine still held requests if `busy`.
  void Step(int stage, int replica, uint64_t step, bool busy);
  // `r` was sent to `stage` (on r.stages[stage].replica).
  void Started(InFlightRequest& r, int stage);
  // `output` of `r` came from `replica` of `stage`.
  void Output(InFlightRequest& r, int stage, int replica, const v1::RequestOutput& output);
  // Sets `record`'s prediction and why it missed (after JudgeObjectives), and
  // counts both.
  void Judge(const InFlightRequest& r, v1::FinishedRequest* record);

 private:
  using Lead = LatencyPredictor::Lead;

  // One of a request's objectives to a first output: its name in messages,
  // whether it is the first audio's, its milliseconds and its deadline.
  struct FirstObjective {
    const char* name;
    bool audio;
    uint32_t ms;
    absl::Time deadline;
  };
  // `r`'s first-output objectives that apply: first output, and first audio
  // for a request that gets audio; those it leaves 0 are left out.
  static std::vector<FirstObjective> FirstObjectives(const InFlightRequest& r);
  // A sheddable request refused or ended: counted.
  void CountShed();

  // The first stage that streams to `r`'s client (its audio: the first audio
  // one); -1: none.
  int Target(const InFlightRequest& r, bool audio) const;
  // Which lead of `stage` a request waits for on its way to `target`.
  Lead LeadKind(int stage, int target) const;
  // When a request gets to a replica, as far as its engine's steps go: now;
  // as a step ends (a request leaving the admission queue takes the slot of
  // one that ended with a step); or at no known point (a later stage: half
  // a step on average).
  enum class Arrival { kNow, kAtStepEnd, kUnknown };
  LeadFeatures FeaturesOn(const InFlightRequest& r, int stage, int replica, Arrival arrival) const;
  // How long a request with `ahead` before it waits for a slot on stage 0, as
  // the requests this orchestrator runs on its live replicas end when
  // predicted (each slot taken again by the next in line for a mean run); -1
  // when none has a prediction. O(requests bound to stage 0).
  double EstimateWait(int ahead) const;
  // From the start of `from` (getting there as `arrival` says) to
  // `target`'s first output, each stage on its best live replica; nullopt
  // when a model is not known yet.
  std::optional<double> PathSeconds(const InFlightRequest& r, int from, int target,
                                    Arrival arrival) const;
  // Why `r` missed an objective whose output comes from `target`.
  std::string MissReason(const InFlightRequest& r, double predicted, uint32_t objective_ms,
                         int target) const;

  CoreParts core_;
  ObjectiveMetrics* const metrics_;
  LatencyPredictor predictor_;
  // Per stage and replica.
  std::map<std::pair<int, int>, StepCadence> cadences_;
};

}  // namespace omnistage

#endif  // OMNISTAGE_ORCHESTRATOR_CORE_OBJECTIVE_PLANNER_H_
