#include "orchestrator/core/abort_coordinator.h"

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/error_proto.h"
#include "common/log.h"
#include "orchestrator/core/stage_error.h"

namespace omnistage {

v1::Terminal AbortTerminal(const PipelineConfig& config, const InFlightRequest& request) {
  v1::Terminal terminal;
  terminal.set_finish_reason(v1::FINISH_REASON_ABORT);
  for (size_t s = 0; s < request.stages.size(); ++s) {
    if (!request.to_client[s]) continue;
    const v1::Modality modality = config.stages[s].output_modality;
    if (modality != v1::MODALITY_TEXT && modality != v1::MODALITY_TOKENS) continue;
    v1::OutputChunk* chunk = terminal.add_partial_output();
    chunk->set_stage_id(static_cast<int>(s));
    chunk->set_modality(modality);
    if (modality == v1::MODALITY_TEXT) {
      chunk->mutable_payload()->mutable_text()->set_text(request.partial_text[s]);
    } else {
      *chunk->mutable_payload()->mutable_tokens()->mutable_ids() = {
          request.partial_tokens[s].begin(), request.partial_tokens[s].end()};
    }
  }
  return terminal;
}

AbortCoordinator::AbortCoordinator(AbortOptions options, const PipelineConfig* config,
                                   const std::vector<std::shared_ptr<StagePool>>* pools,
                                   RequestTable* table, Scheduler* scheduler,
                                   AbortListener* listener)
    : options_(options),
      config_(config),
      pools_(pools),
      table_(table),
      scheduler_(scheduler),
      listener_(listener) {}

AbortCoordinator::~AbortCoordinator() { alive_.End(); }

absl::Time AbortCoordinator::CallDeadline(absl::Time client_deadline) const {
  return std::min(client_deadline, scheduler_->Now() + config_->worker_abort_timeout);
}

// ---- The three phases ------------------------------------------------------------

std::vector<std::string> AbortCoordinator::Freeze(const std::vector<std::string>& ids) {
  std::vector<std::string> frozen;
  absl::flat_hash_set<std::string> seen;
  for (const std::string& id : ids) {
    if (!seen.insert(id).second) continue;
    InFlightRequest* r = table_->Find(id);
    if (r == nullptr) continue;
    ++r->aborting;
    r->abort_asked = true;
    frozen.push_back(id);
  }
  return frozen;
}

struct AbortCoordinator::StopRun {
  std::vector<std::string> ids;
  absl::Time call_deadline;
  size_t stage = 0;
  absl::flat_hash_map<std::string, v1::Error> failed;
  std::function<void(absl::flat_hash_map<std::string, v1::Error>)> done;
};

void AbortCoordinator::Stop(std::vector<std::string> frozen, absl::Time call_deadline,
                            std::function<void(absl::flat_hash_map<std::string, v1::Error>)> done) {
  auto run = std::make_shared<StopRun>();
  run->ids = std::move(frozen);
  run->call_deadline = call_deadline;
  run->done = std::move(done);
  StopFrom(std::move(run));
}

void AbortCoordinator::StopFrom(std::shared_ptr<StopRun> run) {
  if (run->stage >= pools_->size()) {
    run->done(std::move(run->failed));
    return;
  }
  // Requests that ended meanwhile (a replica died) or failed on an earlier stage
  // are left out: a request's stop ends at its first failed stage.
  std::vector<std::string> live;
  live.reserve(run->ids.size());
  for (const std::string& id : run->ids) {
    if (!run->failed.contains(id) && table_->Find(id) != nullptr) live.push_back(id);
  }
  const size_t stage = run->stage;
  std::shared_ptr<StagePool> pool = (*pools_)[stage];
  pool->Abort(
      live, run->call_deadline, [this, alive = alive_.watch(), run, pool](PoolAbortResult result) {
        if (!alive) return;
        for (const ReplicaAbortFailure& failure : result.failures) {
          const v1::Error error =
              StageError(failure.status.code(), config_->stages[run->stage], *pool, failure.replica,
                         absl::StrCat("abort failed: ", failure.status.message()));
          for (const std::string& id : failure.ids) run->failed.emplace(id, error);
        }
        ++run->stage;
        StopFrom(run);
      });
}

std::vector<std::string> AbortCoordinator::Settle(
    const std::vector<std::string>& frozen,
    const absl::flat_hash_map<std::string, v1::Error>& failed) {
  std::vector<std::string> committed;
  for (const std::string& id : frozen) {
    InFlightRequest* r = table_->Find(id);
    // Ended meanwhile, or committed by an overlapping abort of the same request.
    if (r == nullptr || r->aborting == 0) continue;
    if (!failed.contains(id)) {
      committed.push_back(id);
    } else if (--r->aborting == 0) {
      listener_->ResumeRequest(id);
    }
  }
  listener_->EndRequests(committed,
                         [this](const InFlightRequest& r) { return AbortTerminal(*config_, r); });
  return committed;
}

// ---- Who asks -------------------------------------------------------------------

void AbortCoordinator::Hold(const std::vector<std::string>& ids) {
  for (const std::string& id : ids) ++stopping_[id];
}

void AbortCoordinator::Unhold(const std::vector<std::string>& ids) {
  for (const std::string& id : ids) {
    auto it = stopping_.find(id);
    if (--it->second == 0) stopping_.erase(it);
  }
}

void AbortCoordinator::Abort(const std::vector<std::string>& ids, absl::Time client_deadline,
                             std::function<void(v1::AbortResponse)> done, const Caller& caller) {
  std::vector<std::string> own;
  own.reserve(ids.size());
  for (const std::string& id : ids) {
    const InFlightRequest* r = table_->Find(id);
    if (r == nullptr) continue;
    if (r->caller == caller.identity) {
      own.push_back(id);
    } else if (caller.abort_any) {
      own.push_back(id);
      LogInfo(
          LogContext{id, -1, -1, r->trace_id},
          absl::StrCat("admin '", caller.identity, "' aborts this request of '", r->caller, "'"));
    }
  }
  AbortStoppable(ids, own, client_deadline, std::move(done));
}

void AbortCoordinator::AbortStoppable(const std::vector<std::string>& ids,
                                      const std::vector<std::string>& stoppable,
                                      absl::Time client_deadline,
                                      std::function<void(v1::AbortResponse)> done) {
  std::vector<std::string> frozen = Freeze(stoppable);
  Hold(frozen);
  Stop(frozen, CallDeadline(client_deadline),
       [this, alive = alive_.watch(), ids, frozen,
        done = std::move(done)](absl::flat_hash_map<std::string, v1::Error> failed) {
         if (!alive) return;
         Unhold(frozen);
         const std::vector<std::string> committed = Settle(frozen, failed);
         const absl::flat_hash_set<std::string> aborted(committed.begin(), committed.end());
         v1::AbortResponse response;
         for (const std::string& id : ids) {
           v1::AbortResult* result = response.add_results();
           result->set_request_id(id);
           auto it = failed.find(id);
           if (aborted.contains(id)) {
             result->set_outcome(v1::AbortResult::OUTCOME_ABORTED);
           } else if (it != failed.end() && table_->Find(id) != nullptr) {
             result->set_outcome(v1::AbortResult::OUTCOME_FAILED);
             *result->mutable_error() = it->second;
           } else {
             result->set_outcome(v1::AbortResult::OUTCOME_NOT_FOUND);
           }
         }
         done(std::move(response));
       });
}

// A cancel holds the id from its first attempt to its last.
void AbortCoordinator::Cancel(const std::string& id) {
  Hold({id});
  CancelAttempt(id, 0);
}

void AbortCoordinator::CancelAttempt(const std::string& id, int attempt) {
  std::vector<std::string> frozen = Freeze({id});
  if (frozen.empty()) {  // It ended meanwhile.
    Unhold({id});
    return;
  }
  Stop(frozen, CallDeadline(absl::InfiniteFuture()),
       [this, alive = alive_.watch(), frozen,
        attempt](absl::flat_hash_map<std::string, v1::Error> failed) {
         if (!alive) return;
         const std::string& id = frozen.front();
         // The terminal of a committed cancel goes to a client that is gone:
         // harmless, and it keeps "exactly one terminal" true.
         if (!Settle(frozen, failed).empty() || failed.empty()) {
           Unhold(frozen);
           return;
         }
         if (attempt + 1 < options_.cancel_attempts) {
           scheduler_->PostAfter(options_.cancel_backoff * (1 << attempt),
                                 [this, alive, id, attempt] {
                                   if (alive) CancelAttempt(id, attempt + 1);
                                 });
           return;
         }
         Unhold(frozen);
         const v1::Error& cause = failed.begin()->second;
         const v1::Error error = ErrorProto(
             absl::Status(static_cast<absl::StatusCode>(cause.code()),
                          absl::StrCat("could not abort a cancelled request: ", cause.message())));
         listener_->EndRequests(frozen, [&error](const InFlightRequest&) {
           v1::Terminal terminal;
           terminal.set_finish_reason(v1::FINISH_REASON_ERROR);
           *terminal.mutable_error() = error;
           return terminal;
         });
       });
}

void AbortCoordinator::AbortAll(const std::string& why) {
  const std::vector<std::string> ids = table_->Ids();
  if (ids.empty()) return;
  // Every request, whoever started it.
  AbortStoppable(ids, ids, absl::InfiniteFuture(),
                 [this, alive = alive_.watch(), why](v1::AbortResponse result) {
                   if (!alive) return;
                   // The workers could not confirm these: end them anyway.
                   absl::flat_hash_map<std::string, v1::Error> errors;
                   std::vector<std::string> failed;
                   for (const v1::AbortResult& r : result.results()) {
                     if (r.outcome() != v1::AbortResult::OUTCOME_FAILED) continue;
                     failed.push_back(r.request_id());
                     errors[r.request_id()] = ErrorProto(absl::UnavailableError(
                         absl::StrCat(why, "; abort failed: ", r.error().message())));
                   }
                   listener_->EndRequests(failed, [&errors](const InFlightRequest& r) {
                     v1::Terminal terminal;
                     terminal.set_finish_reason(v1::FINISH_REASON_ERROR);
                     *terminal.mutable_error() = errors.at(r.id);
                     return terminal;
                   });
                 });
}

// ---- Leftovers of ended requests -------------------------------------------------

void AbortCoordinator::CleanUp(const std::vector<std::string>& ids) {
  for (size_t stage = 0; stage < pools_->size(); ++stage) {
    std::vector<std::string> bound;
    for (const std::string& id : ids) {
      if ((*pools_)[stage]->Bound(id).has_value()) bound.push_back(id);
    }
    if (bound.empty()) continue;
    for (const std::string& id : bound) ++cleaning_[id];
    CleanUpStage(stage, std::move(bound), 0);
  }
}

// `ids` are counted in cleaning_ until their cleanup on `stage` is over.
void AbortCoordinator::CleanUpStage(size_t stage, std::vector<std::string> ids, int attempt) {
  std::shared_ptr<StagePool> pool = (*pools_)[stage];
  pool->Abort(ids, CallDeadline(absl::InfiniteFuture()),
              [this, alive = alive_.watch(), stage, ids, attempt, pool](PoolAbortResult result) {
                if (!alive) return;
                absl::flat_hash_set<std::string> retried;
                for (ReplicaAbortFailure& failure : result.failures) {
                  if (attempt + 1 >= options_.cleanup_attempts) {
                    // Give the bindings up rather than leak them; the replica's session
                    // breaking (if it is gone) aborts the work worker-side.
                    for (const std::string& id : failure.ids) pool->Release(id);
                    continue;
                  }
                  retried.insert(failure.ids.begin(), failure.ids.end());
                  scheduler_->PostAfter(
                      options_.cleanup_backoff * (1 << attempt),
                      [this, alive, stage, retry = std::move(failure.ids), attempt] {
                        if (alive) CleanUpStage(stage, retry, attempt + 1);
                      });
                }
                for (const std::string& id : ids) {
                  if (retried.contains(id)) continue;
                  auto it = cleaning_.find(id);
                  if (--it->second == 0) cleaning_.erase(it);
                }
              });
}

}  // namespace omnistage
