#include "orchestrator/core/pipeline_core.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/error_proto.h"
#include "common/invariant.h"
#include "common/retry_hint.h"
#include "orchestrator/core/generate_request.h"
#include "orchestrator/core/logged_sink.h"
#include "orchestrator/core/metered_sink.h"
#include "orchestrator/core/output_fold.h"
#include "orchestrator/core/request_id.h"
#include "orchestrator/core/stage_error.h"

namespace omnistage {
namespace {

AbortOptions AbortOptionsFor(const PipelineConfig& config) {
  AbortOptions options;
  options.worker_abort_timeout = config.worker_abort_timeout;
  return options;
}

}  // namespace

namespace {

DemandOptions DemandOptionsFor(const ScalingConfig& scaling) {
  DemandOptions options;
  options.target_utilization = scaling.target_utilization_percent / 100.0;
  options.window = scaling.window;
  return options;
}

std::vector<std::string> StageNames(const PipelineConfig& config) {
  std::vector<std::string> names;
  for (const StageConfig& stage : config.stages) names.push_back(stage.name);
  return names;
}

}  // namespace

PipelineCore::PipelineCore(PipelineConfig config,
                           std::vector<std::vector<ReplicaClient*>> replicas, Scheduler* scheduler)
    : config_(std::move(config)),
      scheduler_(scheduler),
      metrics_(&metrics_registry_, StageNames(config_)),
      finished_(StageNames(config_)),
      table_(scheduler),
      abort_(AbortOptionsFor(config_), &config_, &pools_, &table_, scheduler, this),
      demand_(static_cast<int>(replicas.size()), DemandOptionsFor(config_.scaling)) {
  for (size_t s = config_.stages.size(); s-- > 0;) {
    if (config_.stages[s].failover_max_attempts > 0) first_failover_stage_ = static_cast<int>(s);
  }
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
    pools_.back()->set_on_abort_call(
        [this, stage = static_cast<int>(s)](int replica) {
          metrics_.WorkerAbortCall(stage, replica);
        });
  }
  ArmDemandTimer();
}

PipelineCore::~PipelineCore() {
  *alive_ = false;
  scheduler_->Cancel(drain_timer_);
  scheduler_->Cancel(demand_timer_);
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
                                                  const std::string& caller, bool streamed_input) {
  if (!accepting_) return absl::UnavailableError("the orchestrator is draining; try another one");
  if (absl::Status s = ValidateGenerateRequest(config_, request, streamed_input); !s.ok()) {
    return s;
  }
  if (streamed_input) {
    if (absl::Status s = CheckTakesStreamedInput(); !s.ok()) return s;
  }
  // Refusals of the moment: a request that ends makes room.
  if (static_cast<int>(table_.size()) >= config_.max_in_flight) {
    return RetryLater(absl::StatusCode::kResourceExhausted,
                      absl::StrCat(table_.size(), " requests in flight; the limit is ",
                                   config_.max_in_flight),
                      absl::Seconds(1));
  }
  if (config_.max_in_flight_per_identity > 0 &&
      table_.InFlightOf(caller) >= config_.max_in_flight_per_identity) {
    return RetryLater(
        absl::StatusCode::kResourceExhausted,
        absl::StrCat(caller.empty() ? "the unauthenticated clients have " : "'" + caller + "' has ",
                     table_.InFlightOf(caller),
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
    return absl::UnavailableError(absl::StrCat(
        "request id '", id, "' is still being stopped on stage ", pool->stage_id(),
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
  return id;
}

LogContext PipelineCore::ContextOf(const InFlightRequest& r, int stage, int replica) {
  return LogContext{r.id, stage, replica, r.trace_id};
}

void PipelineCore::Generate(v1::GenerateRequest request, std::shared_ptr<ResponseSink> client,
                            std::string traceparent, const Caller& caller,
                            bool streamed_input) {
  CheckInLoop();
  const ResponseSink* owner = client.get();
  std::string trace_id = TraceIdOf(traceparent);
  // What the client gets is logged and measured on its way.
  auto sink = std::make_shared<MeteredSink>(
      std::make_shared<LoggedSink>(std::move(client), trace_id), &metrics_, scheduler_);
  absl::StatusOr<std::string> id = AdmitId(request, caller.identity, streamed_input);
  if (id.ok() && request.has_priority() && request.priority() > caller.max_priority) {
    id = absl::PermissionDeniedError(absl::StrCat(
        "priority ", request.priority(), " is above the highest ",
        caller.identity.empty() ? "these clients" : "'" + caller.identity + "'",
        " may ask for (", caller.max_priority, ")"));
  }
  if (id.ok()) {
    if (absl::Status limited = rate_limiter_.Admit(caller, scheduler_->Now()); !limited.ok()) {
      metrics_.QueueRefused("rate_limited");
      id = std::move(limited);
    }
  }
  if (!id.ok()) {
    sink->Fail(id.status());
    return;
  }
  std::unique_ptr<InFlightRequest> fresh =
      NewInFlightRequest(config_, request, *id, std::move(sink), scheduler_->Now());
  fresh->caller = caller.identity;
  if (!request.disable_failover() && fresh->last_stage >= first_failover_stage_) {
    fresh->failover = std::make_unique<FailoverState>(config_.stages.size());
  }
  InFlightRequest* added = table_.Add(std::move(fresh));
  if (added == nullptr) return;  // A broken invariant; the call has failed.
  ++arrivals_;
  if (demand_timer_ == 0) ArmDemandTimer();  // Sampling paused while idle.
  InFlightRequest& r = *added;
  r.owner = owner;
  if (streamed_input) {
    metrics_.DuplexAdmitted();
    r.input = std::make_unique<InputStream>();
    r.input->last_at = scheduler_->Now();
    ArmInputTimer(r);
  }
  r.trace_id = std::move(trace_id);
  if (!r.trace_id.empty()) r.traceparent = std::move(traceparent);
  Log(LogLevel::kDebug, ContextOf(r), "admitted");
  if (MustQueue()) {
    const int priority = request.has_priority() ? request.priority() : caller.priority;
    if (Enqueue(r, std::move(*request.mutable_prompt()), priority, caller.weight)) {
      PumpQueue();  // Behind its betters, it may still leave at once.
    }
    return;
  }
  if (std::optional<v1::Error> error = StartFirstStage(r, std::move(*request.mutable_prompt()))) {
    // Nothing started anywhere: the call itself fails.
    std::shared_ptr<ResponseSink> failed = r.sink;
    table_.Remove(*id);
    failed->Fail(StatusFromErrorProto(*error));
    CheckDrained();
    return;
  }
  ArmIdleTimer(r);
  r.sink->Started(*id);
}

// ---- Routing -----------------------------------------------------------------------

std::optional<v1::Error> PipelineCore::StartStage(InFlightRequest& r, int stage,
                                                  std::vector<v1::Payload> input, bool complete) {
  if (!OMNISTAGE_INVARIANT_HOLDS(table_.Find(r.id) == &r, ContextOf(r, stage),
                                 "starting a stage of a request not in flight")) {
    return StageErrorAt(absl::StatusCode::kInternal, stage, -1,
                        "internal error: the request is not in flight (a bug, logged and counted)");
  }
  v1::AddRequest add;
  add.set_request_id(r.id);
  for (v1::Payload& p : input) {
    KeepInput(r, stage, p, complete);
    *add.add_input() = std::move(p);
  }
  add.set_input_complete(complete);
  *add.mutable_params() = r.params[stage];
  add.set_traceparent(r.traceparent);
  SubmitResult sent =
      pools_[stage]->Submit(&add, nullptr, PickContext{r.session_key, nullptr, scheduler_->Now()});
  // The request was bound to none of the lost replicas when they were evicted.
  std::string lost_reason;
  for (const ReplicaLoss& loss : sent.lost) {
    lost_reason = absl::StrCat(" (replica ", loss.replica, ": ", loss.reason.message(), ")");
    metrics_.Evicted(stage, "send_failed");
    HandleReplicaLoss(stage, loss);
  }
  if (sent.status.ok()) {
    r.stages[stage].started = true;
    r.stages[stage].replica = sent.replica;
    r.stages[stage].sent_at = scheduler_->Now();
    Log(LogLevel::kDebug, ContextOf(r, stage, sent.replica), "sent to the stage");
    return std::nullopt;
  }
  if (sent.replica < 0) {
    return StageErrorAt(absl::StatusCode::kUnavailable, stage, -1,
                        absl::StrCat("has no live replica", lost_reason));
  }
  return StageErrorAt(sent.status.code(), stage, sent.replica,
                      absl::StrCat("could not take the request: ", sent.status.message()));
}

void PipelineCore::OnStepOutputs(int stage, int replica, v1::StepOutputs& outputs) {
  CheckInLoop();
  if (outputs.has_load()) {
    pools_[stage]->ReportLoad(replica, outputs.load().requests(), scheduler_->Now());
    if (outputs.load().has_cache()) pools_[stage]->ReportCache(replica, outputs.load().cache());
  }
  FoldOutputs(&outputs);
  // Nothing leaves the admission queue until the whole batch is handled: a
  // request sent now could take an id whose older outputs are still below.
  holding_queue_ = true;
  for (v1::RequestOutput& output : *outputs.mutable_outputs()) {
    // Not ours any more (ended, or re-bound after this replica was evicted).
    if (pools_[stage]->Bound(output.request_id()) != replica) continue;
    InFlightRequest* r = table_.Find(output.request_id());
    if (r == nullptr) {
      if (!OMNISTAGE_INVARIANT_HOLDS(abort_.CleaningUp(output.request_id()),
                                     (LogContext{output.request_id(), stage, replica, ""}),
                                     "a binding without a request")) {
        abort_.CleanUp({output.request_id()});  // Stop it there and let the binding go.
      }
      continue;
    }
    if (r->aborting > 0) {
      r->deferred.push_back(DeferredOutput{stage, replica, output});
      continue;
    }
    HandleOutput(*r, stage, replica, output);
  }
  holding_queue_ = false;
  PumpQueue();  // The load report or the requests that ended freed slots.
}

void PipelineCore::HandleOutput(InFlightRequest& r, int stage, int replica,
                                v1::RequestOutput& output) {
  r.last_activity = scheduler_->Now();
  const std::string id = r.id;
  if (!PassOnOutput(r, stage, replica, output)) return;  // It failed.
  if (r.to_client[stage] && output.payloads_size() > 0) {
    std::vector<v1::OutputChunk> chunks;
    chunks.reserve(output.payloads_size());
    // Counted for the request's record, and charged to an identity with an
    // output-token rate.
    const absl::Time now = scheduler_->Now();
    int64_t output_tokens = 0;
    for (const v1::Payload& p : output.payloads()) {
      output_tokens += r.account.Delivered(p, now);
      if (p.has_text()) r.partial_text[stage] += p.text().text();
      if (p.has_tokens()) {
        r.partial_tokens[stage].insert(r.partial_tokens[stage].end(), p.tokens().ids().begin(),
                                       p.tokens().ids().end());
      }
      v1::OutputChunk& chunk = chunks.emplace_back();
      chunk.set_stage_id(stage);
      chunk.set_modality(config_.stages[stage].output_modality);
      *chunk.mutable_payload() = p;
    }
    if (output_tokens > 0 && rate_limiter_.ChargesOutputOf(r.caller)) {
      rate_limiter_.ChargeOutput(r.caller, output_tokens, now);
    }
    r.sink->Send(id, std::move(chunks));
  }
  if (output.finished()) metrics_.StageDone(stage, scheduler_->Now() - r.stages[stage].sent_at);
  if (output.finished() && output.finish_reason() == v1::FINISH_REASON_ABORT && r.abort_asked) {
    // Stopped by an abort of ours whose answer did not come in time (the
    // client heard it failed): the abort goes on from here. The stages that
    // still run it are stopped, and once they confirm it ends ABORT, as any
    // abort commits: never while a stage may still run it.
    pools_[stage]->Release(id);
    LogInfo(ContextOf(r, stage, replica),
            "stopped by an earlier abort whose answer had not come: stopping it on the other "
            "stages, then it ends as aborted");
    abort_.Cancel(id);
    return;
  }
  if (output.finished() && (output.finish_reason() == v1::FINISH_REASON_ERROR ||
                             output.finish_reason() == v1::FINISH_REASON_ABORT)) {
    // The worker failed it, or something other than this orchestrator stopped it
    // there (this orchestrator's own aborts hold the request's outputs back).
    // Either way it cannot go on: it ends now, saying so.
    const bool stopped = output.finish_reason() == v1::FINISH_REASON_ABORT;
    pools_[stage]->Release(id);  // The worker holds nothing for it any more.
    const v1::Error error = StageErrorAt(
        stopped ? absl::StatusCode::kAborted : StatusFromErrorProto(output.error()).code(),
        stage, replica,
        absl::StrCat(stopped ? "stopped the request: " : "failed: ", output.error().message()));
    if (stopped && pools_[stage]->state(replica).draining) {
      // The worker's drain timeout stopped it: the replica is going away, as
      // if its stream had broken (with failover on, the request moves).
      LoseRequests(stage, replica, {id}, error);
      return;
    }
    FailRequests({id}, error);
    return;
  }
  // The worker holds nothing for a finished request: release before a failed
  // hand-off could abort it there.
  if (output.finished()) pools_[stage]->Release(id);
  if (stage < r.last_stage) {
    HandOff(r, stage, output);
    if (table_.Find(id) == nullptr) return;  // The hand-off failed it.
  }
  if (output.finished()) {
    r.stages[stage].finished = true;
    r.stages[stage].reason = output.finish_reason();
    MaybeComplete(r);
  }
}

void PipelineCore::HandOff(InFlightRequest& r, int stage, v1::RequestOutput& output) {
  const int next = stage + 1;
  StageProgress& to = r.stages[next];
  if (to.finished) return;  // It ended early (e.g. max_tokens).
  const std::string id = r.id;
  const bool last = output.finished();
  std::optional<v1::Error> error;
  if (config_.stages[next].input_mode == InputMode::kOnFinish) {
    for (v1::Payload& p : *output.mutable_payloads()) to.pending_input.push_back(p);
    if (!last) return;
    error = StartStage(r, next, std::move(to.pending_input), /*complete=*/true);
  } else if (output.payloads_size() == 0 && !last) {
    return;
  } else if (!to.started) {
    error = StartStage(r, next, {output.payloads().begin(), output.payloads().end()}, last);
  } else {
    error = SendMoreInput(r, next, output.payloads(), last);
  }
  if (error.has_value()) FailRequests({id}, *error);
}

std::optional<v1::Error> PipelineCore::SendMoreInput(
    InFlightRequest& r, int stage, const google::protobuf::RepeatedPtrField<v1::Payload>& payloads,
    bool last) {
  v1::AppendInput append;
  append.set_request_id(r.id);
  *append.mutable_chunks() = payloads;
  for (const v1::Payload& p : payloads) KeepInput(r, stage, p, last);
  if (payloads.empty() && last && FailsOver(r, stage)) {
    r.failover->stages[stage].input_complete = true;
  }
  append.set_last(last);
  std::optional<ReplicaLoss> lost;
  const absl::Status sent = pools_[stage]->Append(std::move(append), &lost);
  if (lost.has_value()) {
    // The replica is gone, and every request bound to it fails, this one too.
    metrics_.Evicted(stage, "send_failed");
    HandleReplicaLoss(stage, *lost);
    return std::nullopt;
  }
  // NOT_FOUND: an abort already stopped the request on that stage (and failed
  // elsewhere); the chunk has nowhere to go.
  if (sent.ok() || sent.code() == absl::StatusCode::kNotFound) return std::nullopt;
  return StageErrorAt(sent.code(), stage, r.stages[stage].replica,
                      absl::StrCat("could not take more input: ", sent.message()));
}

void PipelineCore::MaybeComplete(InFlightRequest& r) {
  for (size_t s = 0; s < r.stages.size(); ++s) {
    if (r.to_client[s] && !r.stages[s].finished) return;
  }
  const v1::FinishReason reason = r.stages[r.last_stage].reason;
  // Upstream stages may still run (e.g. a talker that hit max_tokens first):
  // EndRequests stops them.
  EndRequests({r.id}, [reason](const InFlightRequest&) {
    v1::Terminal terminal;
    terminal.set_finish_reason(reason);
    return terminal;
  });
}

}  // namespace omnistage
