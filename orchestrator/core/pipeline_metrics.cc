#include "orchestrator/core/pipeline_metrics.h"

#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/invariant.h"
#include "common/modality.h"

namespace omnistage {
namespace {

// The codes a Generate call is refused with before it starts: bad input, a
// duplicate id, overload, no replica or draining.
constexpr absl::StatusCode kRefusalCodes[] = {
    absl::StatusCode::kInvalidArgument, absl::StatusCode::kAlreadyExists,
    absl::StatusCode::kResourceExhausted, absl::StatusCode::kUnavailable};
// The calls that check credentials, and why a replica is evicted (Evicted()).
constexpr const char* kAuthenticatedCalls[] = {"Generate", "Abort", "GetPipelineStatus",
                                               "CallStageUtility", "GetCaller"};
constexpr const char* kEvictionReasons[] = {"stream_ended", "stalled", "send_failed"};
// What became of a request a replica lost on a stage with failover on.
constexpr const char* kFailoverOutcomes[] = {
    "resumed",          "no_live_replica", "attempts_exhausted",
    "replay_too_large", "not_resumable",   "replay_mismatch"};
// PickDecision::why.
constexpr const char* kPickReasons[] = {"round_robin", "least_loaded", "session",
                                        "prefix",      "no_match",     "balance"};
// Why the admission queue refused or ended a request (QueueRefused()).
constexpr const char* kQueueRefusalReasons[] = {"full",     "shed",         "expired",
                                                "draining", "rate_limited", "predicted_miss"};
// Why a GenerateDuplex request's input ended it (InputRefused()).
constexpr const char* kInputRefusalReasons[] = {"malformed", "chunk_too_large", "too_much",
                                                "after_last", "idle"};

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
      in_flight_(registry
                     ->AddGauge("omnistage_in_flight_requests",
                                "Generate calls admitted and not yet ended.")
                     .With({})),
      first_output_(registry->AddHistogram(
          "omnistage_time_to_first_output_seconds",
          "From admission to the first output of each modality sent to the client.", {"modality"},
          LatencyBuckets())),
      heard_(registry, "omnistage"),
      between_outputs_(registry
                           ->AddHistogram("omnistage_time_between_outputs_seconds",
                                          "Gap between consecutive responses of one request.", {},
                                          LatencyBuckets())
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
      worker_abort_ids_(registry->AddCounter(
          "omnistage_worker_abort_ids_total",
          "Request ids in the Abort calls the replicas of each stage answered, by what the "
          "worker found: stopped (live there) or already_ended (it had ended there before the "
          "abort arrived).",
          {"stage", "outcome"})),
      failovers_(registry->AddCounter(
          "omnistage_failovers_total",
          "Requests a replica lost on a stage with failover on, by what became of them.",
          {"stage", "outcome"})),
      picks_(registry->AddCounter(
          "omnistage_picks_total",
          "Requests placed on a replica of a stage, by why that one: round_robin, "
          "least_loaded, session (the replica of the session's last request), prefix (the "
          "prefix-aware pick, something cached there), no_match (the prefix-aware pick, "
          "nothing cached anywhere), balance (the prefix-aware pick fell back to least "
          "loaded).",
          {"stage", "why"})),
      prefix_tokens_(registry->AddCounter(
          "omnistage_prefix_tokens_total",
          "Input tokens of the requests the prefix-aware pick placed (kind=input), and of "
          "those the most likely cached on the replica it chose (kind=matched).",
          {"stage", "kind"})),
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
      queued_(registry->AddGauge(
          "omnistage_admission_queued_requests",
          "Requests waiting in the admission queue for a free slot on stage 0, by priority "
          "(0-9; batch: work that can wait, below them all).",
          {"priority"})),
      queue_wait_(registry
                      ->AddHistogram("omnistage_admission_queue_wait_seconds",
                                     "How long requests that left the admission queue for "
                                     "stage 0 waited in it.",
                                     {}, LatencyBuckets())
                      .With({})),
      queue_refusals_(registry->AddCounter(
          "omnistage_admission_refusals_total",
          "Requests the admission queue refused or ended: full (the call failed), shed (for a "
          "higher priority), expired (limits.max_queue_ms), draining, rate_limited (the "
          "identity's rates in the tokens file; the call failed), or predicted_miss (a "
          "sheddable request predicted to miss its latency objective: the call failed, or it "
          "ended as it left the queue).",
          {"reason"})),
      duplex_(registry
                  ->AddCounter("omnistage_duplex_requests_total",
                               "GenerateDuplex requests admitted (their input streams in).", {})
                  .With({})),
      input_bytes_(registry
                       ->AddCounter("omnistage_streamed_input_bytes_total",
                                    "Input GenerateDuplex clients streamed in after their request, "
                                    "in bytes of its encoded messages (as the limits count).",
                                    {})
                       .With({})),
      input_refusals_(registry->AddCounter(
          "omnistage_streamed_input_refusals_total",
          "GenerateDuplex requests ended by their input: malformed (no content, bad audio, a "
          "second request), chunk_too_large (limits.max_input_chunk_bytes), too_much "
          "(limits.max_input_bytes), after_last, or idle (limits.input_idle_ms).",
          {"reason"})),
      loop_lag_(registry
                    ->AddHistogram("omnistage_event_loop_lag_seconds",
                                   "From posting a task to the event loop to its start.", {},
                                   FineLatencyBuckets())
                    .With({})),
      saturation_(registry->AddGauge(
          "omnistage_stage_saturation",
          "Requests a stage holds and that wait for it (for stage 0 the admission queue), "
          "per slot of its live replicas; above 1 it is short of replicas.",
          {"stage"})),
      demand_replicas_(registry->AddGauge(
          "omnistage_stage_demand_replicas",
          "Replicas a stage needs for the demand measured here (arrivals x slot seconds per "
          "request, at scaling.target_utilization_percent); sum over orchestrators.",
          {"stage"})),
      recommended_replicas_(registry->AddGauge(
          "omnistage_stage_recommended_replicas",
          "omnistage_stage_demand_replicas rounded up, at least 1 (for the stage that limits "
          "the pipeline's audio, omnistage_stage_audio_demand_replicas too; one orchestrator's "
          "view).",
          {"stage"})),
      audio_stream_capacity_(registry->AddGauge(
          "omnistage_stage_audio_stream_capacity",
          "The audio streams a stage's live replicas hold at real time, as measured from what "
          "it produced (absent until measured; a stage fed by a slower one shows at most that "
          "one's).",
          {"stage"})),
      audio_demand_replicas_(registry->AddGauge(
          "omnistage_stage_audio_demand_replicas",
          "Replicas the stage that limits the pipeline's audio needs to make it at real time for "
          "the audio streams asking for it, at scaling.target_utilization_percent (0 on the "
          "other stages; absent until a stage's capacity is measured).",
          {"stage"})),
      audio_playing_(registry
                         ->AddGauge("omnistage_audio_streams",
                                    "Requests whose client was getting audio at the last "
                                    "scaling sample.")
                         .With({})),
      audio_capacity_(registry->AddGauge(
          "omnistage_audio_stream_capacity",
          "The audio streams the pipeline holds with each made at least as fast as it plays, "
          "as measured from what its clients got (absent until measured).")) {
  AddInvariantMetric(registry);
  // Counters whose labels are known start at 0, so that rate() and alerts on
  // an absent series work from the first scrape.
  for (int r = v1::FinishReason_MIN; r <= v1::FinishReason_MAX; ++r) {
    if (!v1::FinishReason_IsValid(r) || r == v1::FINISH_REASON_UNSPECIFIED) continue;
    requests_.With({FinishReasonName(static_cast<v1::FinishReason>(r))});
  }
  for (absl::StatusCode code : kRefusalCodes) refusals_.With({absl::StatusCodeToString(code)});
  for (const char* call : kAuthenticatedCalls) {
    for (absl::StatusCode code :
         {absl::StatusCode::kUnauthenticated, absl::StatusCode::kPermissionDenied}) {
      auth_refusals_.With({call, absl::StatusCodeToString(code)});
    }
  }
  for (const std::string& stage : stage_names_) {
    for (const char* reason : kEvictionReasons) evictions_.With({stage, reason});
    for (const char* outcome : kFailoverOutcomes) failovers_.With({stage, outcome});
    StagePicks picks;
    for (const char* why : kPickReasons) picks.by_why.push_back(&picks_.With({stage, why}));
    picks.input_tokens = &prefix_tokens_.With({stage, "input"});
    picks.matched_tokens = &prefix_tokens_.With({stage, "matched"});
    stage_picks_.push_back(std::move(picks));
  }
  for (const char* reason : kQueueRefusalReasons) queue_refusals_.With({reason});
  for (const char* reason : kInputRefusalReasons) input_refusals_.With({reason});
}

void PipelineMetrics::InputRefused(absl::string_view reason) {
  input_refusals_.With({std::string(reason)}).Increment();
}

void PipelineMetrics::QueueRefused(absl::string_view reason) {
  queue_refusals_.With({std::string(reason)}).Increment();
}

void PipelineMetrics::Finished(v1::FinishReason reason, absl::Duration since_admission) {
  requests_.With({FinishReasonName(reason)}).Increment();
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

void PipelineMetrics::Failover(int stage, absl::string_view outcome) {
  failovers_.With({stage_names_[stage], std::string(outcome)}).Increment();
}

void PipelineMetrics::Picked(int stage, const PickDecision& pick) {
  if (stage < 0 || stage >= static_cast<int>(stage_picks_.size())) return;
  StagePicks& picks = stage_picks_[stage];
  for (size_t i = 0; i < picks.by_why.size(); ++i) {
    if (absl::string_view(pick.why) == kPickReasons[i]) picks.by_why[i]->Increment();
  }
  if (pick.input_tokens > 0) {
    picks.input_tokens->Increment(static_cast<double>(pick.input_tokens));
    picks.matched_tokens->Increment(static_cast<double>(pick.matched_tokens));
  }
}

void PipelineMetrics::WorkerAbortCall(int stage, int replica) {
  worker_aborts_.With({stage_names_[stage], absl::StrCat(replica)}).Increment();
}

void PipelineMetrics::WorkerAbortAnswered(int stage, size_t stopped, size_t already_ended) {
  worker_abort_ids_.With({stage_names_[stage], "stopped"}).Increment(static_cast<double>(stopped));
  worker_abort_ids_.With({stage_names_[stage], "already_ended"})
      .Increment(static_cast<double>(already_ended));
}

void PipelineMetrics::Snapshot(size_t in_flight,
                               const std::vector<std::shared_ptr<StagePool>>& pools,
                               const std::vector<size_t>& queued_by_priority, size_t queued_batch) {
  in_flight_.Set(static_cast<double>(in_flight));
  for (size_t p = 0; p < queued_by_priority.size(); ++p) {
    queued_.With({absl::StrCat(p)}).Set(static_cast<double>(queued_by_priority[p]));
  }
  queued_.With({"batch"}).Set(static_cast<double>(queued_batch));
  // Built aside and swapped in whole: a scrape rendering meanwhile sees every
  // replica (the previous snapshot's or this one's), never a half-built set.
  std::map<std::vector<std::string>, double> up, bound;
  for (const auto& pool : pools) {
    for (int r = 0; r < pool->size(); ++r) {
      if (pool->state(r).removed) continue;
      std::vector<std::string> labels = {stage_names_[pool->stage_id()], absl::StrCat(r)};
      up[labels] = pool->alive(r) ? 1 : 0;
      bound[std::move(labels)] = pool->BoundCount(r);
    }
  }
  up_.ReplaceAll(up);
  bound_.ReplaceAll(bound);
}

void PipelineMetrics::Scaling(const StageDemand& demand) {
  for (size_t s = 0; s < stage_names_.size() && s < demand.stages(); ++s) {
    const std::vector<std::string> labels = {stage_names_[s]};
    const v1::StageScaling& signal = demand.Signal(static_cast<int>(s));
    saturation_.With(labels).Set(signal.saturation());
    demand_replicas_.With(labels).Set(signal.demand_replicas());
    recommended_replicas_.With(labels).Set(signal.recommended_replicas());
    if (signal.audio_capacity_known()) {
      audio_stream_capacity_.With(labels).Set(signal.audio_stream_capacity());
      // Only the stage that limits the pipeline's audio asks for replicas by
      // it (stage_demand.h).
      audio_demand_replicas_.With(labels).Set(
          signal.audio_limited() ? signal.audio_demand_replicas() : 0);
    }
  }
}

void PipelineMetrics::Audio(const v1::AudioCapacityStatus& audio) {
  audio_playing_.Set(audio.playing());
  if (audio.capacity_known()) audio_capacity_.With({}).Set(audio.capacity_streams());
}

}  // namespace omnistage
