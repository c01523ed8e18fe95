// PipelineMetrics: the orchestrator's Prometheus metrics, named and labelled
// in one place (docs/observability.md lists them). The core and its helpers
// report events through the typed methods; gauges of state the event loop
// owns are set by Snapshot*() on the loop when a scrape asks.
//
// Stage labels are stage names (`stage="talker"`), replica labels the replica
// index. Thread-safe (atomics); the event loop is the only writer.
#ifndef OMNISTAGE_ORCHESTRATOR_CORE_PIPELINE_METRICS_H_
#define OMNISTAGE_ORCHESTRATOR_CORE_PIPELINE_METRICS_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/metrics.h"
#include "common/playback_metrics.h"
#include "orchestrator/routing/stage_demand.h"
#include "orchestrator/routing/stage_pool.h"
#include "protos/common.pb.h"
#include "protos/orchestrator.pb.h"

namespace omnistage {

class PipelineMetrics {
 public:
  // Adds the families to `registry`, which must outlive this object.
  // `stage_names[s]` labels stage s.
  PipelineMetrics(MetricsRegistry* registry, std::vector<std::string> stage_names);

  // ---- Requests, as their clients see them ----
  void Finished(v1::FinishReason reason, absl::Duration since_admission);
  // A Generate call that failed before it started (its status code).
  void Refused(absl::StatusCode code);
  void FirstOutput(v1::Modality modality, absl::Duration since_admission);
  // How a listener heard the audio of a request that ended.
  void Heard(const PlaybackFigures& figures) { heard_.Heard({}, figures); }
  void BetweenOutputs(absl::Duration gap);
  void ClientCancelled() { client_cancellations_.Increment(); }
  // A call refused by authentication or authorization (any thread): `call`
  // is the method's name, `code` UNAUTHENTICATED or PERMISSION_DENIED.
  void AuthRefused(absl::string_view call, absl::StatusCode code);
  void AbortCallDone(absl::Duration took) { abort_duration_.Observe(absl::ToDoubleSeconds(took)); }
  // Bytes of responses waiting for slow clients (+ queued, - written).
  void QueuedBytes(int64_t delta) { queued_bytes_.Add(static_cast<double>(delta)); }

  // ---- The admission queue ----
  // A request left the queue for stage 0 after `waited`.
  void LeftQueue(absl::Duration waited) { queue_wait_.Observe(absl::ToDoubleSeconds(waited)); }
  // A request the queue refused or ended: `reason` full, shed, expired,
  // draining or rate_limited.
  void QueueRefused(absl::string_view reason);

  // ---- Streamed input (GenerateDuplex) ----
  void DuplexAdmitted() { duplex_.Increment(); }
  void InputStreamed(int64_t bytes) { input_bytes_.Increment(static_cast<double>(bytes)); }
  // `reason`: malformed, chunk_too_large, too_much, after_last or idle.
  void InputRefused(absl::string_view reason);

  // ---- Stages and replicas ----
  void StageDone(int stage, absl::Duration since_sent);
  // `reason`: stream_ended, stalled or send_failed.
  void Evicted(int stage, absl::string_view reason);
  void WorkerAbortCall(int stage, int replica);
  // A replica of `stage` answered an Abort call: `stopped` ids were live
  // there, `already_ended` had ended before the abort arrived.
  void WorkerAbortAnswered(int stage, size_t stopped, size_t already_ended);
  // A request a replica of `stage` lost, on a stage with failover on:
  // `outcome` resumed, no_live_replica, attempts_exhausted, replay_too_large,
  // not_resumable or replay_mismatch (docs/reliability.md, "Failover").
  void Failover(int stage, absl::string_view outcome);
  // An unbound request placed on `stage` (StagePool's PickDecision).
  void Picked(int stage, const PickDecision& pick);

  // ---- Peer orchestrators ----
  // A call to a peer (`call`: abort or status) ended; `code` its status.
  void PeerCall(absl::string_view call, absl::StatusCode code);

  // ---- Gauges of loop-owned state, set at scrape time on the loop ----
  // The in-flight count, up and bound for every replica `pools` list (removed
  // ones disappear), and the requests queued at each priority
  // (`queued_by_priority[p]`; every priority is listed, 0 when none waits)
  // and below them all (`queued_batch`: GenerateRequest.batch).
  void Snapshot(size_t in_flight, const std::vector<std::shared_ptr<StagePool>>& pools,
                const std::vector<size_t>& queued_by_priority, size_t queued_batch);

  // Each stage's autoscaling signal, as `demand` last sampled it.
  void Scaling(const StageDemand& demand);
  // The audio streams playing and the pipeline's measured audio capacity
  // (left out while unknown).
  void Audio(const v1::AudioCapacityStatus& audio);

  // The event loop's post-to-run delay (EventLoop::set_lag_observer).
  void LoopLag(absl::Duration lag) { loop_lag_.Observe(absl::ToDoubleSeconds(lag)); }

 private:
  const std::vector<std::string> stage_names_;
  Family<Counter>& requests_;
  Family<Counter>& refusals_;
  Family<Counter>& auth_refusals_;
  Gauge& in_flight_;
  Family<Histogram>& first_output_;
  PlaybackMetrics heard_;
  Histogram& between_outputs_;
  Histogram& request_duration_;
  Family<Histogram>& stage_duration_;
  Family<Gauge>& bound_;
  Family<Gauge>& up_;
  Family<Counter>& evictions_;
  Family<Counter>& worker_aborts_;
  Family<Counter>& worker_abort_ids_;
  Family<Counter>& failovers_;
  Family<Counter>& picks_;
  Family<Counter>& prefix_tokens_;
  // Per stage, resolved once: picks by why (kPickReasons' order), then the
  // prefix-aware pick's input and matched tokens.
  struct StagePicks {
    std::vector<Counter*> by_why;
    Counter* input_tokens = nullptr;
    Counter* matched_tokens = nullptr;
  };
  std::vector<StagePicks> stage_picks_;
  Family<Counter>& peer_calls_;
  Histogram& abort_duration_;
  Counter& client_cancellations_;
  Gauge& queued_bytes_;
  Family<Gauge>& queued_;
  Histogram& queue_wait_;
  Family<Counter>& queue_refusals_;
  Counter& duplex_;
  Counter& input_bytes_;
  Family<Counter>& input_refusals_;
  Histogram& loop_lag_;
  Family<Gauge>& saturation_;
  Family<Gauge>& demand_replicas_;
  Family<Gauge>& recommended_replicas_;
  Family<Gauge>& audio_stream_capacity_;
  Family<Gauge>& audio_demand_replicas_;
  Gauge& audio_playing_;
  Family<Gauge>& audio_capacity_;
};

}  // namespace omnistage

#endif  // OMNISTAGE_ORCHESTRATOR_CORE_PIPELINE_METRICS_H_
