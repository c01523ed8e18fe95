#include "orchestrator/pipeline_metrics.h"

#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/invariant.h"
#include "common/modality.h"

namespace omnistage {
namespace {

// FINISH_REASON_LENGTH -> "length".
std::string ReasonLabel(v1::FinishReason reason) {
  std::string name = v1::FinishReason_Name(reason);
  constexpr absl::string_view kPrefix = "FINISH_REASON_";
  if (absl::StartsWith(name, kPrefix)) name = name.substr(kPrefix.size());
  return absl::AsciiStrToLower(name);
}

}  // namespace

PipelineMetrics::PipelineMetrics(MetricsRegistry* registry, std::vector<std::string> stage_names)
    : stage_names_(std::move(stage_names)),
      requests_(registry->AddCounter("omnistage_requests_total",
                                     "Generate calls that ended, by finish reason.",
                                     {"finish_reason"})),
      refusals_(registry->AddCounter(
          "omnistage_request_refusals_total",
          "Generate calls refused before they started, by gRPC status code.", {"code"})),
      auth_refusals_(registry->AddCounter(
          "omnistage_auth_refusals_total",
          "Calls refused for their credentials (UNAUTHENTICATED) or role (PERMISSION_DENIED).",
          {"call", "code"})),
      in_flight_(registry->AddGauge("omnistage_in_flight_requests",
                                    "Generate calls admitted and not yet ended.")
                     .With({})),
      first_output_(registry->AddHistogram(
          "omnistage_time_to_first_output_seconds",
          "From admission to the first output of each modality sent to the client.",
          {"modality"}, LatencyBuckets())),
      between_outputs_(registry
                           ->AddHistogram("omnistage_time_between_outputs_seconds",
                                          "Gap between consecutive responses of one request.",
                                          {}, LatencyBuckets())
                           .With({})),
      request_duration_(registry
                            ->AddHistogram("omnistage_request_duration_seconds",
                                           "From admission to the terminal response.", {},
                                           LatencyBuckets())
                            .With({})),
      stage_duration_(registry->AddHistogram(
          "omnistage_stage_duration_seconds",
          "From sending a request to a stage to that stage's last output for it.", {"stage"},
          LatencyBuckets())),
      bound_(registry->AddGauge("omnistage_bound_requests",
                                "Requests bound to each replica (their KV cache lives there).",
                                {"stage", "replica"})),
      up_(registry->AddGauge("omnistage_replica_up",
                             "1 while the replica is connected and handshaken, else 0.",
                             {"stage", "replica"})),
      evictions_(registry->AddCounter(
          "omnistage_replica_evictions_total",
          "Replicas found down, whose bound requests failed, by reason.", {"stage", "reason"})),
      worker_aborts_(registry->AddCounter("omnistage_worker_abort_calls_total",
                                          "Abort calls sent to each replica.",
                                          {"stage", "replica"})),
      peer_calls_(registry->AddCounter(
          "omnistage_peer_calls_total",
          "Calls to peer orchestrators: forwarded aborts and status, by outcome.",
          {"call", "code"})),
      abort_duration_(registry
                          ->AddHistogram("omnistage_abort_duration_seconds",
                                         "Client Abort calls, from receipt to answer.", {},
                                         LatencyBuckets())
                          .With({})),
      client_cancellations_(
          registry
              ->AddCounter("omnistage_client_cancellations_total",
                           "Generate calls whose client went away (cancel, disconnect, deadline) "
                           "while in flight.")
              .With({})),
      queued_bytes_(registry
                        ->AddGauge("omnistage_client_queued_bytes",
                                   "Response bytes queued for clients that read slower than "
                                   "the pipeline writes.")
                        .With({})),
      loop_lag_(registry
                    ->AddHistogram("omnistage_event_loop_lag_seconds",
                                   "From posting a task to the event loop to its start.", {},
                                   FineLatencyBuckets())
                    .With({})) {
  AddInvariantMetric(registry);
}

void PipelineMetrics::Finished(v1::FinishReason reason, absl::Duration since_admission) {
  requests_.With({ReasonLabel(reason)}).Increment();
  request_duration_.Observe(absl::ToDoubleSeconds(since_admission));
}

void PipelineMetrics::Refused(absl::StatusCode code) {
  refusals_.With({absl::StatusCodeToString(code)}).Increment();
}

void PipelineMetrics::AuthRefused(absl::string_view call, absl::StatusCode code) {
  auth_refusals_.With({std::string(call), absl::StatusCodeToString(code)}).Increment();
}

void PipelineMetrics::PeerCall(absl::string_view call, absl::StatusCode code) {
  peer_calls_.With({std::string(call), absl::StatusCodeToString(code)}).Increment();
}

void PipelineMetrics::FirstOutput(v1::Modality modality, absl::Duration since_admission) {
  first_output_.With({ModalityName(modality)}).Observe(absl::ToDoubleSeconds(since_admission));
}

void PipelineMetrics::BetweenOutputs(absl::Duration gap) {
  between_outputs_.Observe(absl::ToDoubleSeconds(gap));
}

void PipelineMetrics::StageDone(int stage, absl::Duration since_sent) {
  stage_duration_.With({stage_names_[stage]}).Observe(absl::ToDoubleSeconds(since_sent));
}

void PipelineMetrics::Evicted(int stage, absl::string_view reason) {
  evictions_.With({stage_names_[stage], std::string(reason)}).Increment();
}

void PipelineMetrics::WorkerAbortCall(int stage, int replica) {
  worker_aborts_.With({stage_names_[stage], absl::StrCat(replica)}).Increment();
}

void PipelineMetrics::Snapshot(size_t in_flight,
                               const std::vector<std::shared_ptr<StagePool>>& pools) {
  in_flight_.Set(static_cast<double>(in_flight));
  bound_.Clear();
  up_.Clear();
  for (const auto& pool : pools) {
    for (int r = 0; r < pool->size(); ++r) {
      if (pool->state(r).removed) continue;
      const std::vector<std::string> labels = {stage_names_[pool->stage_id()], absl::StrCat(r)};
      up_.With(labels).Set(pool->alive(r) ? 1 : 0);
      bound_.With(labels).Set(pool->BoundCount(r));
    }
  }
}

}  // namespace omnistage
