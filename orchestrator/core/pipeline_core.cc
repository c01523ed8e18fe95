// PipelineCore's face to its clients (pipeline_core.h): admission, Generate
// and its streamed input, cancel, Abort, status, stage utilities, the drain.
// The stages' side is in pipeline_core_routing.cc, the replicas' in
// pipeline_core_replicas.cc, endings in pipeline_core_endings.cc.
#include "orchestrator/core/pipeline_core.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/error_proto.h"
#include "common/invariant.h"
#include "common/retry_hint.h"
#include "common/tracing/trace_context.h"
#include "orchestrator/core/generate_request.h"
#include "orchestrator/core/latency_objectives.h"
#include "orchestrator/core/logged_sink.h"
#include "orchestrator/core/metered_sink.h"
#include "orchestrator/core/request_id.h"
#include "orchestrator/core/stage_admin.h"
#include "orchestrator/core/stage_error.h"

namespace omnistage {
namespace {

std::vector<std::string> StageNames(const PipelineConfig& config) {
  std::vector<std::string> names;
  for (const StageConfig& stage : config.stages) names.push_back(stage.name);
  return names;
}

}  // namespace

PipelineCore::PipelineCore(PipelineConfig config, std::vector<std::vector<ReplicaClient*>> replicas,
                           Scheduler* scheduler)
    : config_(std::move(config)),
      scheduler_(scheduler),
      metrics_(&metrics_registry_, StageNames(config_)),
      objective_metrics_(&metrics_registry_),
      planner_(Parts(), &objective_metrics_),
      tracing_(nullptr, Parts()),
      finished_(StageNames(config_)),
      table_(scheduler),
      abort_(AbortOptions(), &config_, &pools_, &table_, scheduler, this),
      failover_(Parts()),
      audio_(Parts()),
      stage_audio_(Parts()),
      deadlines_(Parts()),
      starts_(Parts(), {[this](InFlightRequest& r) -> std::optional<v1::Error> {
                          tracing_.LeftQueue(r);
                          if (std::optional<v1::Error> shed = planner_.ShedAtStart(r)) {
                            return shed;
                          }
                          std::optional<v1::Error> error =
                              StartFirstStage(r, std::move(r.queued_prompt));
                          if (!error.has_value()) ArmIdleTimer(r);
                          return error;
                        },
                        [this](const std::vector<std::string>& ids, const v1::Error& error) {
                          FailRequests(ids, error);
                        },
                        [this](const InFlightRequest* r) {
                          return r == nullptr ? audio_.Full() : r->wants_audio && audio_.Full(r);
                        }}),
      input_(Parts(), {[this](InFlightRequest& r,
                              const google::protobuf::RepeatedPtrField<v1::Payload>& payloads,
                              bool last) { return SendMoreInput(r, 0, payloads, last); },
                       [this](const std::vector<std::string>& ids, const v1::Error& error) {
                         FailRequests(ids, error);
                       }}),
      demand_(static_cast<int>(replicas.size()), config_.scaling, scheduler, [this] {
        DemandSampler::Observed observed;
        audio_.Sample();
        stage_audio_.Sample();
        for (const auto& pool : pools_) {
          observed.loads.push_back(pool->Load());
          observed.loads.back().audio = stage_audio_.Load(pool->stage_id());
        }
        // What waits for stage 0 waits in the admission queue.
        if (!observed.loads.empty()) {
          observed.loads[0].waiting += static_cast<int>(starts_.order().size());
        }
        observed.idle = table_.empty() && starts_.order().empty();
        observed.draining = !accepting_;
        return observed;
      }) {
  for (size_t s = 0; s < replicas.size(); ++s) {
    pools_.push_back(std::make_shared<StagePool>(static_cast<int>(s), std::move(replicas[s]),
                                                 /*alive=*/false));
    if (s < config_.stages.size()) {
      pools_.back()->set_pick(config_.stages[s].pick, config_.stages[s].prefix);
    }
    pools_.back()->set_clock([scheduler] { return scheduler->Now(); });
    pools_.back()->set_on_pick([this, stage = static_cast<int>(s)](const PickDecision& pick) {
      metrics_.Picked(stage, pick);
    });
    pools_.back()->set_on_abort_call([this, stage = static_cast<int>(s)](int replica) {
      metrics_.WorkerAbortCall(stage, replica);
    });
    pools_.back()->set_on_abort_answer(
        [this, stage = static_cast<int>(s)](int, size_t stopped, size_t already_ended) {
          metrics_.WorkerAbortAnswered(stage, stopped, already_ended);
        });
  }
}

CoreParts PipelineCore::Parts() {
  return CoreParts{&config_, &table_, &pools_, &metrics_, scheduler_};
}

PipelineCore::~PipelineCore() {
  alive_.End();
  scheduler_->Cancel(drain_timer_);
}

void PipelineCore::CheckInLoop() const {
  OMNISTAGE_INVARIANT(scheduler_->InLoop(), "PipelineCore called off its event loop's thread");
}

v1::Error PipelineCore::StageErrorAt(absl::StatusCode code, int stage, int replica,
                                     absl::string_view what) const {
  return StageError(code, config_.stages[stage], *pools_[stage], replica, what);
}

bool PipelineCore::Ready() const {
  CheckInLoop();
  if (!accepting_) return false;
  for (const auto& pool : pools_) {
    if (pool->LiveReplicas().empty()) return false;
  }
  return true;
}

bool PipelineCore::Holds(const std::string& id, const Caller& caller) const {
  const InFlightRequest* r = table_.Find(id);
  return r != nullptr && (r->caller == caller.identity || caller.abort_any);
}

void PipelineCore::set_replica_address(int stage, int replica, std::string address) {
  pools_[stage]->set_address(replica, std::move(address));
}

// ---- Admission ---------------------------------------------------------------------

absl::StatusOr<std::string> PipelineCore::AdmitId(const v1::GenerateRequest& request,
                                                  const Caller& caller, bool streamed_input) {
  if (!accepting_) return absl::UnavailableError("the orchestrator is draining; try another one");
  if (absl::Status s = ValidateGenerateRequest(config_, request, streamed_input); !s.ok()) {
    return s;
  }
  if (streamed_input) {
    if (absl::Status s = input_.CheckStageZeroTakesIt(); !s.ok()) return s;
  }
  // Refusals of the moment: a request that ends makes room.
  if (static_cast<int>(table_.size()) >= config_.max_in_flight) {
    return RetryLater(
        absl::StatusCode::kResourceExhausted,
        absl::StrCat(table_.size(), " requests in flight; the limit is ", config_.max_in_flight),
        absl::Seconds(1));
  }
  if (config_.max_in_flight_per_identity > 0 &&
      table_.InFlightOf(caller.identity) >= config_.max_in_flight_per_identity) {
    return RetryLater(absl::StatusCode::kResourceExhausted,
                      absl::StrCat(caller.identity.empty() ? "the unauthenticated clients have "
                                                           : "'" + caller.identity + "' has ",
                                   table_.InFlightOf(caller.identity),
                                   " requests in flight; limits.max_in_flight_per_identity is ",
                                   config_.max_in_flight_per_identity),
                      absl::Seconds(1));
  }
  std::string id = request.request_id();
  // Generated ids cannot be guessed (128 random bits).
  while (id.empty() || (request.request_id().empty() && table_.Find(id) != nullptr)) {
    id = GeneratedRequestId(node_id_);
  }
  if (table_.Find(id) != nullptr) {
    return absl::AlreadyExistsError(absl::StrCat("request '", id, "' is already in flight"));
  }
  // A previous request with this id ended, but a stage is still confirming that
  // it stopped: reusing the id now could mix the two up on that replica.
  for (const auto& pool : pools_) {
    if (!pool->Bound(id).has_value()) continue;
    if (!OMNISTAGE_INVARIANT_HOLDS(abort_.CleaningUp(id), (LogContext{id, -1, -1, ""}),
                                   "a binding without a request")) {
      abort_.CleanUp({id});  // Stop it there and let the binding go.
    }
    return absl::UnavailableError(
        absl::StrCat("request id '", id, "' is still being stopped on stage ", pool->stage_id(),
                     " after its previous use; retry shortly or use another id"));
  }
  // An abort, a cancel or a cleanup of the previous request is still under way
  // (a cleanup retries even once the binding went with its replica), and would
  // take the new one for it.
  if (abort_.Stopping(id)) {
    return absl::UnavailableError(absl::StrCat(
        "request id '", id,
        "' is still being stopped after its previous use; retry shortly or use another id"));
  }
  if (request.has_priority() && !request.batch() && request.priority() > caller.max_priority) {
    return absl::PermissionDeniedError(
        absl::StrCat("priority ", request.priority(), " is above the highest ",
                     caller.identity.empty() ? "these clients" : "'" + caller.identity + "'",
                     " may ask for (", caller.max_priority, ")"));
  }
  if (absl::Status limited = rate_limiter_.Admit(caller, scheduler_->Now()); !limited.ok()) {
    metrics_.QueueRefused("rate_limited");
    return limited;
  }
  return id;
}

void PipelineCore::Generate(v1::GenerateRequest request, std::shared_ptr<ResponseSink> client,
                            std::string traceparent, const Caller& caller, bool streamed_input,
                            std::string tracestate) {
  CheckInLoop();
  const ResponseSink* owner = client.get();
  std::string trace_id = TraceIdOf(traceparent);
  // What the client gets is logged and measured on its way.
  auto sink = std::make_shared<MeteredSink>(
      std::make_shared<LoggedSink>(std::move(client), trace_id), &metrics_, scheduler_);
  absl::StatusOr<std::string> id = AdmitId(request, caller, streamed_input);
  if (!id.ok()) {
    sink->Fail(id.status());
    return;
  }
  std::unique_ptr<InFlightRequest> fresh =
      NewInFlightRequest(config_, request, *id, std::move(sink), scheduler_->Now());
  fresh->caller = caller.identity;
  fresh->batch = request.batch();
  fresh->objectives =
      WithDefaults(fresh->objectives, caller.objectives, config_.objectives, fresh->wants_audio);
  fresh->failover = failover_.StateFor(request, fresh->last_stage);
  InFlightRequest* added = table_.Add(std::move(fresh));
  if (added == nullptr) return;  // A broken invariant; the call has failed.
  demand_.Arrived();
  InFlightRequest& r = *added;
  r.owner = owner;
  if (streamed_input) input_.Open(r);
  r.trace_id = std::move(trace_id);
  if (!r.trace_id.empty()) {
    r.traceparent = std::move(traceparent);
    r.tracestate = std::move(tracestate);
  }
  Log(LogLevel::kDebug, ContextOf(r), "admitted");
  const bool waits = starts_.MustWait(r);
  // Work that can wait goes below every priority.
  const int priority = request.batch()          ? kBatchPriority
                       : request.has_priority() ? request.priority()
                                                : caller.priority;
  tracing_.Admitted(r, streamed_input ? "GenerateDuplex" : "Generate", priority);
  // The requests due to leave the queue before it: those of its priority or
  // higher.
  int ahead = -1;
  if (waits) {
    ahead = 0;
    for (int p = priority; p <= kMaxPriority; ++p) {
      ahead += static_cast<int>(starts_.order().CountAt(p));
    }
  }
  if (absl::Status predicted = planner_.Admit(r, request.prompt().size(), ahead); !predicted.ok()) {
    Log(LogLevel::kDebug, ContextOf(r), absl::StrCat("refused: ", predicted.message()));
    RefuseCall(r, predicted);
    return;
  }
  if (waits) {
    if (absl::Status queued =
            starts_.Add(r, std::move(*request.mutable_prompt()), priority, caller.weight);
        !queued.ok()) {
      RefuseCall(r, queued);
      return;
    }
    tracing_.Queued(r);
    starts_.Pump();  // Behind its betters, it may still leave at once.
    return;
  }
  if (std::optional<v1::Error> error = StartFirstStage(r, std::move(*request.mutable_prompt()))) {
    RefuseCall(r, StatusFromErrorProto(*error));
    return;
  }
  ArmIdleTimer(r);
  r.sink->Started(*id);
}

void PipelineCore::RefuseCall(InFlightRequest& r, const absl::Status& error) {
  // Nothing started anywhere: the call itself fails.
  std::shared_ptr<ResponseSink> failed = r.sink;
  tracing_.Refused(r, error);
  table_.Remove(r.id);
  failed->Fail(error);
  CheckDrained();
}

void PipelineCore::AppendInput(const std::string& id, const ResponseSink* sink,
                               v1::GenerateInput message) {
  CheckInLoop();
  InFlightRequest* r = table_.Find(id);
  // It ended (or never started): what the client still sends goes nowhere.
  if (r == nullptr || r->owner != sink || r->input == nullptr) return;
  input_.Append(*r, std::move(message));
}

// ---- Client calls ------------------------------------------------------------------

void PipelineCore::Cancel(const std::string& request_id, const ResponseSink* sink) {
  CheckInLoop();
  InFlightRequest* r = table_.Find(request_id);
  // Goes ahead even while a client Abort of it runs: if that one fails, this one
  // still stops the work of a client that is gone.
  if (r == nullptr || r->owner != sink) return;
  tracing_.Cancelled(*r);
  metrics_.ClientCancelled();
  abort_.Cancel(request_id);
}

void PipelineCore::Abort(const v1::AbortRequest& request, absl::Time client_deadline,
                         std::function<void(absl::StatusOr<v1::AbortResponse>)> done,
                         const Caller& caller) {
  CheckInLoop();
  if (request.request_ids_size() > kMaxAbortIdsPerCall) {
    done(absl::InvalidArgumentError(absl::StrCat("request_ids: ", request.request_ids_size(),
                                                 " ids; the limit is ", kMaxAbortIdsPerCall)));
    return;
  }
  for (const std::string& id : request.request_ids()) {
    if (InFlightRequest* r = table_.Find(id)) tracing_.AbortRequested(*r, caller.identity);
  }
  abort_.Abort(
      {request.request_ids().begin(), request.request_ids().end()}, client_deadline,
      [this, alive = alive_.watch(), received = scheduler_->Now(),
       done = std::move(done)](v1::AbortResponse response) {
        if (alive) metrics_.AbortCallDone(scheduler_->Now() - received);
        for (const v1::AbortResult& result : response.results()) {
          if (result.outcome() != v1::AbortResult::OUTCOME_FAILED) continue;
          LogWarning(
              {result.request_id(), result.error().stage_id(), result.error().replica(), ""},
              absl::StrCat("abort failed (the client may retry): ", result.error().message()));
        }
        done(std::move(response));
      },
      caller);
}

void PipelineCore::SnapshotMetrics() {
  CheckInLoop();
  std::vector<size_t> queued(kMaxPriority + 1);
  for (int p = 0; p <= kMaxPriority; ++p) queued[p] = starts_.order().CountAt(p);
  metrics_.Snapshot(table_.size(), pools_, queued, starts_.order().CountAt(kBatchPriority));
  metrics_.Scaling(demand_.demand());
  metrics_.Audio(audio_.Status());
}

v1::PipelineStatus PipelineCore::Status() const {
  CheckInLoop();
  v1::PipelineStatus status;
  status.set_in_flight_requests(static_cast<int>(table_.size()));
  status.set_accepting(accepting_);
  status.set_invariant_violations(InvariantViolations());
  DescribeStages(config_, pools_, scheduler_->Now(), &status);
  for (v1::StageStatus& stage : *status.mutable_stages()) {
    *stage.mutable_scaling() = demand_.demand().Signal(stage.stage_id());
  }
  status.set_node_id(node_id_);
  for (const QueueLevel& level : starts_.order().Levels()) {
    v1::QueuedRequests* queued = status.add_queued();
    queued->set_priority(level.priority);
    queued->set_identity(level.identity);
    queued->set_waiting(static_cast<int>(level.waiting));
  }
  finished_.AppendTo(status.mutable_recent());
  *status.mutable_audio() = audio_.Status();
  *status.mutable_objectives() = objective_metrics_.tally();
  return status;
}

void PipelineCore::CallStageUtility(
    const v1::StageUtilityRequest& request,
    std::function<void(absl::StatusOr<v1::StageUtilityResponse>)> done) {
  CheckInLoop();
  omnistage::CallStageUtility(config_, pools_, request, std::move(done));
}

// ---- Draining -----------------------------------------------------------------------

void PipelineCore::Drain(absl::Time deadline, std::function<void()> done) {
  CheckInLoop();
  accepting_ = false;
  on_drained_ = std::move(done);
  starts_.RefuseAll(ErrorProto(absl::UnavailableError(
      "the orchestrator is draining; this request waited in its admission queue and never "
      "started: try another one")));
  LogInfo(absl::StrCat("draining: admitting no more requests; ", table_.size(),
                       " in flight get until ", absl::FormatTime(deadline), ", then are aborted"));
  drain_timer_ = scheduler_->PostAt(deadline, [this, alive = alive_.watch()] {
    if (!alive) return;
    drain_timer_ = 0;
    abort_.AbortAll("the orchestrator is shutting down");
  });
  CheckDrained();
}

void PipelineCore::CheckDrained() {
  if (accepting_ || !table_.empty() || !on_drained_) return;
  scheduler_->Cancel(drain_timer_);
  drain_timer_ = 0;
  std::function<void()> done = std::move(on_drained_);
  on_drained_ = nullptr;
  LogInfo("drained: no request in flight");
  done();
}

}  // namespace omnistage
