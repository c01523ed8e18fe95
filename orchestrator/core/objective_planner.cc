#include "orchestrator/core/objective_planner.h"

#include <algorithm>
#include <tuple>
#include <utility>

#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "common/error_proto.h"
#include "common/retry_hint.h"

namespace omnistage {
namespace {

// A stage whose lead overran its prediction by more than this share of it
// was slow (rather than the prediction a little off).
constexpr double kSlowShare = 0.25;

bool Completed(v1::FinishReason reason) {
  return reason == v1::FINISH_REASON_STOP || reason == v1::FINISH_REASON_LENGTH;
}

}  // namespace

ObjectivePlanner::ObjectivePlanner(CoreParts core, ObjectiveMetrics* metrics)
    : core_(core), metrics_(metrics) {}

std::vector<ObjectivePlanner::FirstObjective> ObjectivePlanner::FirstObjectives(
    const InFlightRequest& r) {
  std::vector<FirstObjective> objectives;
  const absl::Time admitted = r.account.admitted();
  if (const uint32_t ms = r.objectives.first_output_ms(); ms > 0) {
    objectives.push_back({"first output", false, ms, admitted + absl::Milliseconds(ms)});
  }
  if (const uint32_t ms = r.objectives.first_audio_ms(); ms > 0 && r.wants_audio) {
    objectives.push_back({"first audio", true, ms, admitted + absl::Milliseconds(ms)});
  }
  return objectives;
}

void ObjectivePlanner::CountShed() {
  core_.metrics->QueueRefused("predicted_miss");
  metrics_->Shed();
}

int ObjectivePlanner::Target(const InFlightRequest& r, bool audio) const {
  for (int s = 0; s <= r.last_stage && s < static_cast<int>(r.to_client.size()); ++s) {
    if (r.to_client[s] && (!audio || core_.stage(s).output_modality == v1::MODALITY_AUDIO)) {
      return s;
    }
  }
  return -1;
}

LatencyPredictor::Lead ObjectivePlanner::LeadKind(int stage, int target) const {
  if (stage >= target) return Lead::kFirstOutput;
  return core_.stage(stage + 1).input_mode == InputMode::kStreaming ? Lead::kFirstOutput
                                                                    : Lead::kDone;
}

LeadFeatures ObjectivePlanner::FeaturesOn(const InFlightRequest& r, int stage, int replica,
                                          Arrival arrival) const {
  LeadFeatures features{static_cast<double>(core_.pool(stage).state(replica).load()),
                        r.forecast.prompt_kbytes};
  auto cadence = cadences_.find({stage, replica});
  if (cadence == cadences_.end()) return features;
  features.step_period = cadence->second.period();
  switch (arrival) {
    case Arrival::kNow:
      // An idle engine steps at once.
      if (features.running > 0) {
        features.until_step = cadence->second.UntilStepEnds(core_.scheduler->Now());
      }
      break;
    case Arrival::kAtStepEnd:
      features.until_step = cadence->second.period();
      break;
    case Arrival::kUnknown:
      features.until_step = cadence->second.period() / 2;
      break;
  }
  return features;
}

double ObjectivePlanner::EstimateWait(int ahead) const {
  const absl::Time now = core_.scheduler->Now();
  std::vector<double> remaining;
  double runs = 0;
  const StagePool& pool = core_.pool(0);
  for (int replica : pool.LiveReplicas()) {
    for (const std::string& id : pool.BoundTo(replica)) {
      const InFlightRequest* q = core_.table->Find(id);
      if (q == nullptr || q->stages.empty()) continue;
      const StageProgress& first = q->stages[0];
      if (!first.started || first.finished || first.predicted_done < 0) continue;
      remaining.push_back(
          std::max(0.0, first.predicted_done - absl::ToDoubleSeconds(now - first.sent_at)));
      runs += first.predicted_done;
    }
  }
  if (remaining.empty()) return -1;
  std::sort(remaining.begin(), remaining.end());
  const size_t n = remaining.size();
  const size_t k = static_cast<size_t>(std::max(ahead, 0));
  return remaining[k % n] + static_cast<double>(k / n) * (runs / static_cast<double>(n));
}

std::optional<double> ObjectivePlanner::PathSeconds(const InFlightRequest& r, int from, int target,
                                                    Arrival arrival) const {
  double total = 0;
  for (int s = from; s <= target; ++s) {
    const Lead kind = LeadKind(s, target);
    std::optional<double> best;
    for (int replica : core_.pool(s).LiveReplicas()) {
      std::optional<double> lead = predictor_.PredictLead(
          s, replica, kind, FeaturesOn(r, s, replica, s == from ? arrival : Arrival::kUnknown));
      if (lead.has_value() && (!best.has_value() || *lead < *best)) best = lead;
    }
    if (!best.has_value()) return std::nullopt;
    total += *best;
  }
  return total;
}

absl::Status ObjectivePlanner::Admit(InFlightRequest& r, size_t prompt_bytes, int ahead) {
  RequestForecast& forecast = r.forecast;
  forecast.prompt_kbytes = static_cast<double>(prompt_bytes) / 1000.0;
  forecast.ahead = ahead;
  // Every request that waits teaches the wait's model, objectives or not.
  if (ahead >= 0) forecast.wait_estimate = EstimateWait(ahead);
  const std::vector<FirstObjective> objectives = FirstObjectives(r);
  if (objectives.empty()) return absl::OkStatus();
  double wait = 0;
  if (ahead >= 0) {
    std::optional<double> predicted = predictor_.PredictWait(ahead, forecast.wait_estimate);
    if (!predicted.has_value()) return absl::OkStatus();
    wait = *predicted;
  }
  forecast.wait = wait;
  auto predict = [&](bool audio) {
    const int target = Target(r, audio);
    std::optional<double> path =
        target < 0 ? std::nullopt
                   : PathSeconds(r, 0, target, ahead >= 0 ? Arrival::kAtStepEnd : Arrival::kNow);
    return path.has_value() ? wait + *path : 0.0;
  };
  forecast.first_output = predict(false);
  if (r.wants_audio) forecast.first_audio = predict(true);
  if (r.objectives.criticality() != v1::CRITICALITY_SHEDDABLE) return absl::OkStatus();
  for (const FirstObjective& objective : objectives) {
    const double predicted = objective.audio ? forecast.first_audio : forecast.first_output;
    if (predicted <= objective.ms / 1000.0) continue;
    CountShed();
    return RetryLater(
        absl::StatusCode::kResourceExhausted,
        absl::StrFormat("the pipeline is predicted to miss this request's %s objective (%.0f ms "
                        "predicted, %u ms asked): a sheddable request is refused rather than "
                        "served late",
                        objective.name, predicted * 1000, objective.ms),
        std::max(absl::Seconds(1), absl::Seconds(wait)));
  }
  return absl::OkStatus();
}

std::optional<v1::Error> ObjectivePlanner::ShedAtStart(const InFlightRequest& r) {
  if (r.objectives.criticality() != v1::CRITICALITY_SHEDDABLE) return std::nullopt;
  const absl::Time now = core_.scheduler->Now();
  for (const FirstObjective& objective : FirstObjectives(r)) {
    const int target = Target(r, objective.audio);
    std::optional<double> path =
        target < 0 ? std::nullopt : PathSeconds(r, 0, target, Arrival::kNow);
    if (!path.has_value() || now + absl::Seconds(*path) <= objective.deadline) continue;
    CountShed();
    return ErrorProto(RetryLater(
        absl::StatusCode::kResourceExhausted,
        absl::StrFormat("waited %.0f ms in the admission queue and is now predicted to miss its "
                        "%s objective (%u ms): a sheddable request ends rather than run late",
                        absl::ToDoubleMilliseconds(now - r.account.admitted()), objective.name,
                        objective.ms),
        absl::Seconds(1)));
  }
  return std::nullopt;
}

std::vector<int> ObjectivePlanner::Avoid(const InFlightRequest& r, int stage) const {
  // Every request's every stage comes here: most have no objective.
  const std::vector<FirstObjective> objectives = FirstObjectives(r);
  if (objectives.empty()) return {};
  const std::vector<int> live = core_.pool(stage).LiveReplicas();
  if (live.size() < 2) return {};
  const absl::Time now = core_.scheduler->Now();
  std::vector<int> avoid;
  for (const FirstObjective& objective : objectives) {
    const int target = Target(r, objective.audio);
    if (target < stage) continue;
    std::optional<double> rest =
        stage < target ? PathSeconds(r, stage + 1, target, Arrival::kUnknown) : 0.0;
    if (!rest.has_value()) continue;
    for (int replica : live) {
      std::optional<double> lead = predictor_.PredictLead(
          stage, replica, LeadKind(stage, target), FeaturesOn(r, stage, replica, Arrival::kNow));
      if (lead.has_value() && now + absl::Seconds(*lead + *rest) > objective.deadline &&
          std::find(avoid.begin(), avoid.end(), replica) == avoid.end()) {
        avoid.push_back(replica);
      }
    }
  }
  if (avoid.size() == live.size()) return {};
  return avoid;
}

void ObjectivePlanner::Step(int stage, int replica, uint64_t step, bool busy) {
  if (step == 0) return;
  cadences_[{stage, replica}].Step(step, core_.scheduler->Now(), busy);
}

void ObjectivePlanner::Started(InFlightRequest& r, int stage) {
  const absl::Time now = core_.scheduler->Now();
  RequestForecast& forecast = r.forecast;
  if (stage == 0 && forecast.waited < 0) {
    forecast.waited = absl::ToDoubleSeconds(now - r.account.admitted());
    if (forecast.ahead >= 0) {
      if (forecast.wait >= 0)
        metrics_->PredictionError("queue_wait", "", forecast.wait, forecast.waited);
      predictor_.LearnWait(forecast.ahead, forecast.wait_estimate, forecast.waited);
    }
  }
  StageProgress& progress = r.stages[stage];
  progress.lead_replica = progress.replica;
  progress.lead_features = FeaturesOn(r, stage, progress.replica, Arrival::kNow);
  // The pool counts this request on the replica already: alone there, it
  // finds the engine idle.
  progress.lead_features.running = std::max(0.0, progress.lead_features.running - 1);
  if (progress.lead_features.running == 0) progress.lead_features.until_step = 0;
  progress.predicted_first_output =
      predictor_.PredictLead(stage, progress.replica, Lead::kFirstOutput, progress.lead_features)
          .value_or(-1);
  progress.predicted_done =
      predictor_.PredictLead(stage, progress.replica, Lead::kDone, progress.lead_features)
          .value_or(-1);
  progress.first_output_at = absl::InfiniteFuture();
  progress.done_at = absl::InfiniteFuture();
}

void ObjectivePlanner::Output(InFlightRequest& r, int stage, int replica,
                              const v1::RequestOutput& output) {
  StageProgress& progress = r.stages[stage];
  // Moved by failover since it started: its leads mix two replicas.
  if (progress.lead_replica != replica) return;
  const absl::Time now = core_.scheduler->Now();
  const double lead = absl::ToDoubleSeconds(now - progress.sent_at);
  const std::string& name = core_.stage(stage).name;
  if (output.payloads_size() > 0 && progress.first_output_at == absl::InfiniteFuture()) {
    progress.first_output_at = now;
    if (progress.predicted_first_output >= 0) {
      metrics_->PredictionError("stage_first_output", name, progress.predicted_first_output, lead);
    }
    predictor_.LearnLead(stage, replica, Lead::kFirstOutput, progress.lead_features, lead);
  }
  if (output.finished() && Completed(output.finish_reason())) {
    progress.done_at = now;
    if (progress.predicted_done >= 0) {
      metrics_->PredictionError("stage_done", name, progress.predicted_done, lead);
    }
    predictor_.LearnLead(stage, replica, Lead::kDone, progress.lead_features, lead);
  }
}

std::string ObjectivePlanner::MissReason(const InFlightRequest& r, double predicted,
                                         uint32_t objective_ms, int target) const {
  if (predicted <= 0 || target < 0) return "unpredicted";
  if (predicted > objective_ms / 1000.0) return "predicted";
  const RequestForecast& forecast = r.forecast;
  if (forecast.waited < 0) return "queued";  // It never left the queue.
  const double wait_over = forecast.waited - std::max(forecast.wait, 0.0);
  double worst = 0;
  double worst_predicted = 0;
  for (int s = 0; s <= target && s < static_cast<int>(r.stages.size()); ++s) {
    const StageProgress& progress = r.stages[s];
    if (progress.lead_replica < 0) continue;
    const bool first = LeadKind(s, target) == Lead::kFirstOutput;
    const absl::Time at = first ? progress.first_output_at : progress.done_at;
    const double expected = first ? progress.predicted_first_output : progress.predicted_done;
    if (at == absl::InfiniteFuture() || expected < 0) continue;
    const double over = absl::ToDoubleSeconds(at - progress.sent_at) - expected;
    if (over > worst) {
      worst = over;
      worst_predicted = expected;
    }
  }
  if (wait_over > 0 && wait_over >= worst) return "queued";
  if (worst > kSlowShare * worst_predicted && worst > 0) return "slow_replica";
  return "mispredicted";
}

void ObjectivePlanner::Judge(const InFlightRequest& r, v1::FinishedRequest* record) {
  const RequestForecast& forecast = r.forecast;
  record->set_predicted_first_output_seconds(forecast.first_output);
  for (const auto& [name, outcome, ms, predicted, actual, audio] :
       {std::tuple<const char*, v1::ObjectiveOutcome, uint32_t, double, double, bool>{
            "first_output", record->first_output_objective(), r.objectives.first_output_ms(),
            forecast.first_output, record->first_output_seconds(), false},
        {"first_audio", record->first_audio_objective(), r.objectives.first_audio_ms(),
         forecast.first_audio, record->first_audio_seconds(), true}}) {
    if (predicted > 0 && actual > 0) metrics_->PredictionError(name, "", predicted, actual);
    if (outcome != v1::OBJECTIVE_OUTCOME_MISSED) continue;
    const std::string reason = MissReason(r, predicted, ms, Target(r, audio));
    metrics_->Missed(name, reason);
    if (record->objective_miss().empty()) record->set_objective_miss(reason);
  }
  // The predictor does not forecast the gaps between outputs.
  if (record->between_outputs_objective() == v1::OBJECTIVE_OUTCOME_MISSED) {
    metrics_->Missed("between_outputs", "unpredicted");
    if (record->objective_miss().empty()) record->set_objective_miss("unpredicted");
  }
}

}  // namespace omnistage
