#include "orchestrator/pipeline_core.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/ascii.h"
#include "absl/time/clock.h"
#include "orchestrator/pipeline_request.h"

namespace omnistage {

PipelineCore::PipelineCore(PipelineConfig config,
                           std::vector<std::vector<ReplicaClient*>> replicas, EventLoop* loop)
    : config_(std::move(config)), loop_(loop) {
  for (size_t s = 0; s < replicas.size(); ++s) {
    replica_info_.emplace_back(replicas[s].size());
    pools_.push_back(std::make_shared<StagePool>(static_cast<int>(s), std::move(replicas[s]),
                                                 /*alive=*/false));
  }
}

PipelineCore::~PipelineCore() { *alive_ = false; }

PipelineCore::Request* PipelineCore::Find(const std::string& id) {
  auto it = requests_.find(id);
  return it == requests_.end() ? nullptr : it->second.get();
}

v1::Error PipelineCore::StageError(absl::StatusCode code, int stage, int replica,
                                   const std::string& what) const {
  v1::Error error;
  error.set_code(static_cast<int>(code));
  error.set_stage_id(stage);
  error.set_replica(replica);
  std::string where = absl::StrCat("stage ", stage, " (", config_.stages[stage].name, ")");
  if (replica >= 0) {
    absl::StrAppend(&where, " replica ", replica);
    error.set_instance_id(replica_info_[stage][replica].instance_id);
  }
  error.set_message(absl::StrCat(where, " ", what));
  return error;
}

// ---- Generate ---------------------------------------------------------------

absl::Status PipelineCore::Validate(const v1::GenerateRequest& request) const {
  const std::string& id = request.request_id();
  if (id.size() > kMaxRequestIdBytes) {
    return absl::InvalidArgumentError(absl::StrCat("request_id is ", id.size(),
                                                   " bytes; the limit is ", kMaxRequestIdBytes));
  }
  for (char c : id) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' &&
        c != ':' && c != '-') {
      return absl::InvalidArgumentError(
          "request_id may contain only letters, digits and . _ : -");
    }
  }
  if (request.prompt().empty()) return absl::InvalidArgumentError("prompt is empty");
  if (request.prompt().size() > config_.max_prompt_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("prompt is ", request.prompt().size(),
                                                   " bytes; the limit is ",
                                                   config_.max_prompt_bytes));
  }
  for (int m : request.output_modalities()) {
    if (m == v1::MODALITY_UNSPECIFIED || !v1::Modality_IsValid(m)) {
      return absl::InvalidArgumentError(absl::StrCat("output_modalities: unknown modality ", m));
    }
    const bool produced =
        std::any_of(config_.stages.begin(), config_.stages.end(), [m](const StageConfig& s) {
          return s.final_output && s.output_modality == m;
        });
    if (!produced) {
      return absl::InvalidArgumentError(
          absl::StrCat("output_modalities: no final stage of this pipeline produces ",
                       ModalityName(static_cast<v1::Modality>(m))));
    }
  }
  std::vector<bool> seen(config_.stages.size(), false);
  for (const v1::StageParameters& p : request.stage_params()) {
    if (p.stage_id() < 0 || p.stage_id() >= static_cast<int>(config_.stages.size())) {
      return absl::InvalidArgumentError(absl::StrCat("stage_params: no stage ", p.stage_id(),
                                                     " (the pipeline has ",
                                                     config_.stages.size(), ")"));
    }
    if (seen[p.stage_id()]) {
      return absl::InvalidArgumentError(
          absl::StrCat("stage_params: stage ", p.stage_id(), " given twice"));
    }
    seen[p.stage_id()] = true;
    if (p.has_max_tokens() && (p.max_tokens() < 1 || p.max_tokens() > 1000000)) {
      return absl::InvalidArgumentError(absl::StrCat("stage_params[stage ", p.stage_id(),
                                                     "].max_tokens must be in [1, 1000000]"));
    }
  }
  return absl::OkStatus();
}

v1::StageParameters PipelineCore::ParamsFor(const v1::GenerateRequest& request,
                                            int stage) const {
  v1::StageParameters params = config_.stages[stage].defaults;
  params.set_stage_id(stage);
  for (const v1::StageParameters& p : request.stage_params()) {
    if (p.stage_id() != stage) continue;
    if (p.has_max_tokens()) params.set_max_tokens(p.max_tokens());
    if (p.has_seed()) params.set_seed(p.seed());
    if (p.has_temperature()) params.set_temperature(p.temperature());
    for (const auto& [key, value] : p.extra()) (*params.mutable_extra())[key] = value;
  }
  return params;
}

void PipelineCore::Generate(v1::GenerateRequest request, std::shared_ptr<ResponseSink> sink) {
  if (!accepting_) {
    sink->Fail(absl::UnavailableError("the orchestrator is draining; try another one"));
    return;
  }
  if (absl::Status s = Validate(request); !s.ok()) {
    sink->Fail(s);
    return;
  }
  if (static_cast<int>(requests_.size()) >= config_.max_in_flight) {
    sink->Fail(absl::ResourceExhaustedError(
        absl::StrCat(requests_.size(), " requests in flight; the limit is ",
                     config_.max_in_flight)));
    return;
  }
  std::string id = request.request_id();
  while (id.empty() || (request.request_id().empty() && Find(id) != nullptr)) {
    id = absl::StrCat("req-", next_generated_id_++);
  }
  if (Find(id) != nullptr) {
    sink->Fail(absl::AlreadyExistsError(absl::StrCat("request '", id, "' is already in flight")));
    return;
  }
  // A previous request with this id ended, but a stage is still confirming that
  // it stopped: reusing the id now could mix the two up on that replica.
  for (const auto& pool : pools_) {
    if (pool->Bound(id).has_value()) {
      sink->Fail(absl::UnavailableError(absl::StrCat(
          "request id '", id, "' is still being stopped on stage ", pool->stage_id(),
          " after its previous use; retry shortly or use another id")));
      return;
    }
  }
  auto owned = std::make_unique<Request>();
  Request& r = *owned;
  r.id = id;
  r.sink = std::move(sink);
  const int stages = static_cast<int>(config_.stages.size());
  r.stages.resize(stages);
  r.to_client.assign(stages, false);
  r.partial_text.resize(stages);
  r.partial_tokens.resize(stages);
  for (int s = 0; s < stages; ++s) {
    const StageConfig& stage = config_.stages[s];
    const bool wanted =
        request.output_modalities().empty() ||
        std::find(request.output_modalities().begin(), request.output_modalities().end(),
                  stage.output_modality) != request.output_modalities().end();
    r.to_client[s] = stage.final_output && wanted;
    if (r.to_client[s]) r.last_stage = s;
    r.params.push_back(ParamsFor(request, s));
  }
  r.last_activity = absl::Now();
  requests_.emplace(id, std::move(owned));

  std::vector<v1::Payload> input(1);
  input[0].mutable_text()->set_text(std::move(*request.mutable_prompt()));
  if (absl::Status s = StartStage(r, 0, std::move(input), /*complete=*/true); !s.ok()) {
    // Nothing started anywhere: the call itself fails.
    std::shared_ptr<ResponseSink> failed = r.sink;
    Forget(id);
    failed->Fail(s);
    return;
  }
  ArmIdleTimer(r);
  r.sink->Started(id);
}

absl::Status PipelineCore::StartStage(Request& r, int stage, std::vector<v1::Payload> input,
                                      bool complete) {
  StagePool& pool = *pools_[stage];
  absl::StatusOr<int> replica = pool.Pick(r.id);
  if (!replica.ok()) {
    return absl::UnavailableError(
        absl::StrCat("stage ", stage, " (", config_.stages[stage].name, ") has no live replica"));
  }
  v1::AddRequest add;
  add.set_request_id(r.id);
  for (v1::Payload& p : input) *add.add_input() = std::move(p);
  add.set_input_complete(complete);
  *add.mutable_params() = r.params[stage];
  if (absl::Status s = pool.replica(*replica)->Add(std::move(add)); !s.ok()) {
    pool.Release(r.id);  // A failed submit leaves no binding.
    return absl::UnavailableError(absl::StrCat("stage ", stage, " (", config_.stages[stage].name,
                                               ") replica ", *replica,
                                               ": could not send the request: ", s.message()));
  }
  r.stages[stage].started = true;
  r.stages[stage].replica = *replica;
  return absl::OkStatus();
}

// ---- Routing -----------------------------------------------------------------

void PipelineCore::OnStepOutputs(int stage, int replica, v1::StepOutputs outputs) {
  for (v1::RequestOutput& output : *outputs.mutable_outputs()) {
    Request* r = Find(output.request_id());
    // Not ours any more (ended, or re-bound after this replica was evicted).
    if (r == nullptr || pools_[stage]->Bound(r->id) != replica) continue;
    if (r->aborting > 0) {
      r->deferred.push_back(Request::Deferred{stage, replica, std::move(output)});
      continue;
    }
    HandleOutput(*r, stage, replica, std::move(output));
  }
}

void PipelineCore::HandleOutput(Request& r, int stage, int replica, v1::RequestOutput output) {
  r.last_activity = absl::Now();
  const std::string id = r.id;
  if (r.to_client[stage] && output.payloads_size() > 0) {
    std::vector<v1::OutputChunk> chunks;
    chunks.reserve(output.payloads_size());
    for (const v1::Payload& p : output.payloads()) {
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
    r.sink->Send(id, std::move(chunks));
  }
  const bool failed = output.finished() && output.finish_reason() == v1::FINISH_REASON_ERROR;
  if (failed) {
    v1::Error error = StageError(static_cast<absl::StatusCode>(output.error().code()), stage,
                                 replica, absl::StrCat("failed: ", output.error().message()));
    if (error.code() == 0) error.set_code(static_cast<int>(absl::StatusCode::kInternal));
    pools_[stage]->Release(id);
    FailRequests({id}, error);
    return;
  }
  // The worker holds nothing for a finished request: release before a failed
  // hand-off could abort it there.
  if (output.finished()) pools_[stage]->Release(id);
  if (stage < r.last_stage) {
    if (absl::Status s = HandOff(r, stage, output); !s.ok()) {
      // StartStage's message already names the stage (and replica).
      v1::Error error;
      error.set_code(static_cast<int>(s.code()));
      error.set_message(std::string(s.message()));
      error.set_stage_id(stage + 1);
      error.set_replica(-1);
      FailRequests({id}, error);
      return;
    }
  }
  if (output.finished()) {
    r.stages[stage].finished = true;
    r.stages[stage].reason = output.finish_reason();
    MaybeComplete(r);
  }
}

absl::Status PipelineCore::HandOff(Request& r, int stage, v1::RequestOutput& output) {
  const int next = stage + 1;
  Request::Stage& to = r.stages[next];
  if (to.finished) return absl::OkStatus();  // It ended early (e.g. max_tokens).
  const bool last = output.finished();
  if (config_.stages[next].input_mode == InputMode::kOnFinish) {
    for (v1::Payload& p : *output.mutable_payloads()) to.pending_input.push_back(p);
    if (!last) return absl::OkStatus();
    return StartStage(r, next, std::move(to.pending_input), /*complete=*/true);
  }
  if (output.payloads_size() == 0 && !last) return absl::OkStatus();
  std::vector<v1::Payload> chunks(output.payloads().begin(), output.payloads().end());
  if (!to.started) return StartStage(r, next, std::move(chunks), /*complete=*/last);
  v1::AppendInput append;
  append.set_request_id(r.id);
  for (v1::Payload& p : chunks) *append.add_chunks() = std::move(p);
  append.set_last(last);
  // A failure means the replica's session broke; OnReplicaDown follows.
  (void)pools_[next]->replica(to.replica)->AppendInput(std::move(append));
  return absl::OkStatus();
}

void PipelineCore::MaybeComplete(Request& r) {
  for (size_t s = 0; s < r.stages.size(); ++s) {
    if (r.to_client[s] && !r.stages[s].finished) return;
  }
  Complete(r, r.stages[r.last_stage].reason);
}

// ---- Endings -------------------------------------------------------------------

void PipelineCore::Complete(Request& r, v1::FinishReason reason) {
  const std::string id = r.id;
  v1::Terminal terminal;
  terminal.set_finish_reason(reason);
  r.sink->Finish(id, std::move(terminal));
  // Upstream stages may still run (e.g. a talker that hit max_tokens first). The
  // aborts go out before Forget(), which may complete a drain.
  AbortLeftovers({id}, 0);
  Forget(id);
}

void PipelineCore::FailRequests(const std::vector<std::string>& ids, const v1::Error& error) {
  std::vector<std::string> failed;
  for (const std::string& id : ids) {
    Request* r = Find(id);
    if (r == nullptr || std::find(failed.begin(), failed.end(), id) != failed.end()) continue;
    v1::Terminal terminal;
    terminal.set_finish_reason(v1::FINISH_REASON_ERROR);
    *terminal.mutable_error() = error;
    r->sink->Finish(id, std::move(terminal));
    failed.push_back(id);
  }
  // Before Forget(), which may complete a drain.
  AbortLeftovers(failed, 0);
  for (const std::string& id : failed) Forget(id);
}

void PipelineCore::AbortLeftovers(std::vector<std::string> ids, int attempt) {
  if (ids.empty()) return;
  auto shared_ids = std::make_shared<std::vector<std::string>>(std::move(ids));
  for (const auto& pool : pools_) {
    std::vector<std::string> bound;
    for (const std::string& id : *shared_ids) {
      if (pool->Bound(id).has_value()) bound.push_back(id);
    }
    if (bound.empty()) continue;
    pool->Abort(bound, [this, alive = std::weak_ptr<bool>(alive_), pool, bound, attempt,
                        shared_ids](absl::Status status) {
      if (alive.expired() || status.ok()) return;
      if (attempt >= 3) {
        // Give the bindings up rather than leak them; the replica's session
        // breaking (if it is gone) aborts the work worker-side.
        for (const std::string& id : bound) pool->Release(id);
        return;
      }
      auto retry = [this, alive, bound, attempt] {
        if (!alive.expired()) AbortLeftovers(bound, attempt + 1);
      };
      if (loop_ != nullptr) {
        loop_->PostAfter(absl::Milliseconds(100 << attempt), retry);
      } else {
        retry();
      }
    });
  }
}

void PipelineCore::Forget(const std::string& id) {
  auto it = requests_.find(id);
  if (it == requests_.end()) return;
  if (it->second->idle_timer != 0 && loop_ != nullptr) loop_->Cancel(it->second->idle_timer);
  requests_.erase(it);
  CheckDrained();
}

// ---- Replicas ------------------------------------------------------------------

void PipelineCore::OnReplicaReady(int stage, int replica, const v1::Ready& ready) {
  ReplicaInfo& info = replica_info_[stage][replica];
  if (pools_[stage]->alive(replica)) {
    if (info.instance_id == ready.instance_id()) return;
    OnReplicaDown(stage, replica,
                  absl::UnavailableError(absl::StrCat("restarted as ", ready.instance_id())));
  }
  info.instance_id = ready.instance_id();
  info.capacity = ready.capacity();
  info.last_error.clear();
  pools_[stage]->Revive(replica);
}

void PipelineCore::OnReplicaDown(int stage, int replica, const absl::Status& reason) {
  replica_info_[stage][replica].last_error = std::string(reason.message());
  if (!pools_[stage]->alive(replica)) return;
  const std::vector<std::string> affected = pools_[stage]->Evict(replica);
  FailRequests(affected, StageError(absl::StatusCode::kUnavailable, stage, replica,
                                    absl::StrCat("died: ", reason.message())));
}

void PipelineCore::OnCommandRejected(int stage, int replica,
                                     const v1::CommandRejected& rejected) {
  Request* r = Find(rejected.request_id());
  if (r == nullptr || pools_[stage]->Bound(r->id) != replica) return;
  // A rejected Add never started there; after anything else the worker still
  // holds the request, so the binding stays and FailRequests aborts it.
  if (rejected.command() == v1::CommandRejected::KIND_ADD) pools_[stage]->Release(r->id);
  FailRequests({r->id}, StageError(static_cast<absl::StatusCode>(rejected.error().code()), stage,
                                   replica, absl::StrCat("rejected the request: ",
                                                         rejected.error().message())));
}

// ---- Idle timeout --------------------------------------------------------------

void PipelineCore::ArmIdleTimer(Request& r) {
  if (loop_ == nullptr || config_.request_idle_timeout <= absl::ZeroDuration()) return;
  r.idle_timer = loop_->PostAt(r.last_activity + config_.request_idle_timeout,
                               [this, alive = std::weak_ptr<bool>(alive_), id = r.id] {
                                 if (!alive.expired()) OnIdleTimer(id);
                               });
}

void PipelineCore::OnIdleTimer(const std::string& id) {
  Request* r = Find(id);
  if (r == nullptr) return;
  r->idle_timer = 0;
  if (r->aborting > 0) {
    // Outputs are held while an abort runs, so last_activity stands still: wait
    // a whole timeout from now rather than fire again at once.
    r->last_activity = absl::Now();
    ArmIdleTimer(*r);
    return;
  }
  if (absl::Now() - r->last_activity < config_.request_idle_timeout) {
    ArmIdleTimer(*r);
    return;
  }
  // Blame the first stage still working on it.
  int stage = 0;
  while (stage < r->last_stage &&
         (r->stages[stage].finished || !r->stages[stage].started)) {
    ++stage;
  }
  FailRequests({id}, StageError(absl::StatusCode::kDeadlineExceeded, stage,
                                r->stages[stage].replica,
                                absl::StrCat("produced nothing for ",
                                             absl::FormatDuration(config_.request_idle_timeout),
                                             " (request_idle_timeout)")));
}

}  // namespace omnistage
