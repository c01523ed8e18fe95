// PipelineCore's control paths: the two-phase abort (client Abort, cancellation,
// drain), status, utility fan-out and draining. See pipeline_core.h.
#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "orchestrator/pipeline_core.h"
#include "orchestrator/pipeline_request.h"

namespace omnistage {

void PipelineCore::Abort(const v1::AbortRequest& request,
                         std::function<void(absl::StatusOr<v1::AbortResponse>)> done) {
  if (request.request_ids_size() > kMaxAbortIds) {
    done(absl::InvalidArgumentError(absl::StrCat("request_ids: ", request.request_ids_size(),
                                                 " ids; the limit is ", kMaxAbortIds)));
    return;
  }
  std::vector<std::string> order(request.request_ids().begin(), request.request_ids().end());
  // Phase 1: freeze the requests (their partial output stops changing).
  auto ids = std::make_shared<std::vector<std::string>>();
  for (const std::string& id : order) {
    if (std::find(ids->begin(), ids->end(), id) == ids->end() && BeginAbort(id)) {
      ids->push_back(id);
    }
  }
  auto respond = [order = std::move(order), done = std::move(done)](
                     absl::StatusOr<std::vector<std::string>> aborted) {
    if (!aborted.ok()) {
      done(aborted.status());
      return;
    }
    v1::AbortResponse response;
    for (const std::string& id : order) {
      v1::AbortResult* result = response.add_results();
      result->set_request_id(id);
      const bool hit = std::find(aborted->begin(), aborted->end(), id) != aborted->end();
      result->set_outcome(hit ? v1::AbortResult::OUTCOME_ABORTED
                              : v1::AbortResult::OUTCOME_NOT_FOUND);
    }
    done(std::move(response));
  };
  if (ids->empty()) {
    respond(std::vector<std::string>());
    return;
  }
  // Phase 2: every stage stops them, one worker call per replica in total.
  AbortStages(ids, 0,
              [this, alive = std::weak_ptr<bool>(alive_), ids,
               respond = std::move(respond)](absl::Status status) {
                if (alive.expired()) return;
                if (!status.ok()) {
                  // Nothing is committed; what failed stays bound for a retry.
                  CancelAbort(*ids);
                  respond(status);
                  return;
                }
                // Phase 3: commit, one terminal ABORT each.
                respond(CommitAbort(*ids));
              });
}

bool PipelineCore::BeginAbort(const std::string& id) {
  Request* r = Find(id);
  if (r == nullptr) return false;
  ++r->aborting;
  return true;
}

void PipelineCore::AbortStages(std::shared_ptr<std::vector<std::string>> ids, size_t stage,
                               std::function<void(absl::Status)> done) {
  if (stage >= pools_.size()) {
    done(absl::OkStatus());
    return;
  }
  // Requests that ended meanwhile (a replica died, or they finished) are skipped.
  std::vector<std::string> live;
  for (const std::string& id : *ids) {
    if (Find(id) != nullptr) live.push_back(id);
  }
  pools_[stage]->Abort(live, [this, alive = std::weak_ptr<bool>(alive_), ids, stage,
                              done = std::move(done)](absl::Status status) mutable {
    if (alive.expired()) return;
    if (!status.ok()) {
      done(status);
      return;
    }
    AbortStages(ids, stage + 1, std::move(done));
  });
}

std::vector<std::string> PipelineCore::CommitAbort(const std::vector<std::string>& ids) {
  std::vector<std::string> committed;
  for (const std::string& id : ids) {
    Request* r = Find(id);
    if (r == nullptr || r->aborting == 0) continue;
    v1::Terminal terminal;
    terminal.set_finish_reason(v1::FINISH_REASON_ABORT);
    for (size_t s = 0; s < r->stages.size(); ++s) {
      if (!r->to_client[s]) continue;
      const v1::Modality modality = config_.stages[s].output_modality;
      if (modality == v1::MODALITY_TEXT) {
        v1::OutputChunk* chunk = terminal.add_partial_output();
        chunk->set_stage_id(static_cast<int>(s));
        chunk->set_modality(modality);
        chunk->mutable_payload()->mutable_text()->set_text(r->partial_text[s]);
      } else if (modality == v1::MODALITY_TOKENS) {
        v1::OutputChunk* chunk = terminal.add_partial_output();
        chunk->set_stage_id(static_cast<int>(s));
        chunk->set_modality(modality);
        *chunk->mutable_payload()->mutable_tokens()->mutable_ids() = {
            r->partial_tokens[s].begin(), r->partial_tokens[s].end()};
      }
    }
    r->sink->Finish(id, std::move(terminal));
    committed.push_back(id);
  }
  // Every stage confirmed; bindings made before the abort froze are gone, but a
  // request bound after its stage's call is stopped here too. Before Forget(),
  // which may complete a drain.
  AbortLeftovers(committed, 0);
  for (const std::string& id : committed) Forget(id);
  return committed;
}

void PipelineCore::CancelAbort(const std::vector<std::string>& ids) {
  for (const std::string& id : ids) {
    Request* r = Find(id);
    if (r == nullptr || r->aborting == 0) continue;
    if (--r->aborting > 0) continue;  // Another abort of it is still running.
    std::vector<Request::Deferred> deferred = std::move(r->deferred);
    r->deferred.clear();
    for (Request::Deferred& d : deferred) {
      r = Find(id);
      if (r == nullptr) break;
      // Stages whose abort succeeded have no binding: their outputs are void.
      if (pools_[d.stage]->Bound(id) != d.replica) continue;
      HandleOutput(*r, d.stage, d.replica, std::move(d.output));
    }
  }
}

void PipelineCore::Cancel(const std::string& request_id, const ResponseSink* sink) {
  Request* r = Find(request_id);
  // Goes ahead even while a client Abort of it runs: if that one fails, this one
  // still stops the work of a client that is gone.
  if (r == nullptr || r->sink.get() != sink) return;
  RetryCancel(request_id, 0);
}

void PipelineCore::RetryCancel(const std::string& id, int attempt) {
  if (!BeginAbort(id)) return;
  auto ids = std::make_shared<std::vector<std::string>>(1, id);
  AbortStages(ids, 0, [this, alive = std::weak_ptr<bool>(alive_), ids,
                       attempt](absl::Status status) {
    if (alive.expired()) return;
    if (status.ok()) {
      CommitAbort(*ids);  // The terminal goes to a client that is gone: harmless.
      return;
    }
    CancelAbort(*ids);
    if (attempt >= 4 || loop_ == nullptr) {
      v1::Error error;
      error.set_code(static_cast<int>(status.code()));
      error.set_message(absl::StrCat("could not abort a cancelled request: ", status.message()));
      error.set_stage_id(-1);
      error.set_replica(-1);
      FailRequests(*ids, error);
      return;
    }
    loop_->PostAfter(absl::Milliseconds(50 << attempt), [this, alive, ids, attempt] {
      if (!alive.expired()) RetryCancel(ids->front(), attempt + 1);
    });
  });
}

// ---- Status and utilities -------------------------------------------------------

v1::PipelineStatus PipelineCore::Status() const {
  v1::PipelineStatus status;
  status.set_in_flight_requests(static_cast<int>(requests_.size()));
  status.set_accepting(accepting_);
  for (size_t s = 0; s < config_.stages.size(); ++s) {
    const StageConfig& config = config_.stages[s];
    v1::StageStatus* stage = status.add_stages();
    stage->set_stage_id(static_cast<int>(s));
    stage->set_name(config.name);
    stage->set_engine(config.engine);
    stage->set_output_modality(config.output_modality);
    stage->set_final_output(config.final_output);
    for (int r = 0; r < pools_[s]->size(); ++r) {
      const ReplicaInfo& info = replica_info_[s][r];
      v1::ReplicaStatus* replica = stage->add_replicas();
      replica->set_replica(r);
      replica->set_address(info.address);
      replica->set_alive(pools_[s]->alive(r));
      replica->set_instance_id(info.instance_id);
      replica->set_capacity(info.capacity);
      replica->set_bound_requests(pools_[s]->BoundCount(r));
      replica->set_last_error(info.last_error);
    }
  }
  return status;
}

void PipelineCore::CallStageUtility(
    const v1::StageUtilityRequest& request,
    std::function<void(absl::StatusOr<v1::StageUtilityResponse>)> done) {
  const int stage = request.stage_id();
  if (stage < 0 || stage >= static_cast<int>(pools_.size())) {
    done(absl::InvalidArgumentError(absl::StrCat("stage_id: no stage ", stage, " (the pipeline has ",
                                                 pools_.size(), ")")));
    return;
  }
  if (request.name().empty()) {
    done(absl::InvalidArgumentError("name: empty utility name"));
    return;
  }
  StagePool& pool = *pools_[stage];
  struct Gather {
    v1::StageUtilityResponse response;
    int pending = 0;
    std::function<void(absl::StatusOr<v1::StageUtilityResponse>)> done;
  };
  auto gather = std::make_shared<Gather>();
  gather->done = std::move(done);
  gather->pending = pool.size() + 1;  // +1 until every call is out.
  auto finish_one = [gather] {
    if (--gather->pending == 0) gather->done(std::move(gather->response));
  };
  for (int r = 0; r < pool.size(); ++r) {
    v1::ReplicaUtilityResult* result = gather->response.add_results();
    result->set_replica(r);
    result->set_address(replica_info_[stage][r].address);
    if (!pool.alive(r)) {
      *result->mutable_error() =
          StageError(absl::StatusCode::kUnavailable, stage, r, "is not alive");
      finish_one();
      continue;
    }
    pool.replica(r)->CallUtility(
        request.name(), request.args(),
        [this, alive = std::weak_ptr<bool>(alive_), gather, r, stage,
         finish_one](absl::StatusOr<google::protobuf::Value> value) {
          v1::ReplicaUtilityResult* result = gather->response.mutable_results(r);
          if (value.ok()) {
            *result->mutable_value() = *std::move(value);
          } else if (!alive.expired()) {
            *result->mutable_error() =
                StageError(value.status().code(), stage, r, std::string(value.status().message()));
          }
          finish_one();
        });
  }
  finish_one();
}

// ---- Draining -------------------------------------------------------------------

void PipelineCore::Drain(absl::Time deadline, std::function<void()> done) {
  accepting_ = false;
  on_drained_ = std::move(done);
  if (loop_ != nullptr) {
    loop_->PostAt(deadline, [this, alive = std::weak_ptr<bool>(alive_)] {
      if (alive.expired() || requests_.empty()) return;
      v1::AbortRequest all;
      for (const auto& [id, r] : requests_) all.add_request_ids(id);
      Abort(all, [this, alive, ids = all.request_ids()](
                     absl::StatusOr<v1::AbortResponse> result) {
        if (alive.expired() || result.ok()) return;
        // The workers could not confirm: end the requests anyway.
        v1::Error error;
        error.set_code(static_cast<int>(absl::StatusCode::kUnavailable));
        error.set_message(absl::StrCat("orchestrator shutting down; abort failed: ",
                                       result.status().message()));
        error.set_stage_id(-1);
        error.set_replica(-1);
        FailRequests({ids.begin(), ids.end()}, error);
      });
    });
  }
  CheckDrained();
}

void PipelineCore::CheckDrained() {
  if (accepting_ || !requests_.empty() || !on_drained_) return;
  std::function<void()> done = std::move(on_drained_);
  on_drained_ = nullptr;
  done();
}

}  // namespace omnistage
