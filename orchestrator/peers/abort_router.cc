#include "orchestrator/peers/abort_router.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/error_proto.h"
#include "orchestrator/core/abort_coordinator.h"
#include "orchestrator/core/request_id.h"

namespace omnistage {
namespace {

using Outcomes = absl::flat_hash_map<std::string, v1::AbortResult>;

// Where an id's abort goes.
struct Route {
  bool local = false;
  // The peer (index into Run::peers) an owned id goes to; -1: every peer.
  int peer = -1;
};

// id -> its first result in `response`.
Outcomes ByIdOf(const v1::AbortResponse& response) {
  Outcomes by_id;
  for (const v1::AbortResult& result : response.results()) by_id.emplace(result.request_id(), result);
  return by_id;
}

v1::AbortResult Failed(const std::string& id, const absl::Status& why) {
  v1::AbortResult result;
  result.set_request_id(id);
  result.set_outcome(v1::AbortResult::OUTCOME_FAILED);
  *result.mutable_error() = ErrorProto(why, -1, -1, "");
  return result;
}

}  // namespace

struct AbortRouter::Run {
  std::vector<std::string> ids;
  std::vector<Route> routes;
  std::vector<PeerInfo> peers;
  // Per peer: its answer by id, or why it gave none.
  std::vector<absl::StatusOr<Outcomes>> answers;
  Outcomes local;
  absl::Status local_error;
  int pending = 0;
  AbortDone done;
};

AbortRouter::AbortRouter(std::string self_node, LocalAborts local, PeerCalls* peers,
                         absl::Duration peer_timeout, Scheduler* loop,
                         std::function<void(absl::StatusCode)> on_peer_call)
    : self_node_(std::move(self_node)),
      local_(std::move(local)),
      peers_(peers),
      peer_timeout_(peer_timeout),
      loop_(loop),
      on_peer_call_(std::move(on_peer_call)) {}

AbortRouter::~AbortRouter() = default;

void AbortRouter::RouteIds(const v1::AbortRequest& request, const Caller& caller, Run* run,
                           v1::AbortRequest* local,
                           std::vector<v1::PeerAbortRequest>* forwarded) const {
  absl::flat_hash_map<std::string, int> peer_of_node;
  for (size_t p = 0; p < run->peers.size(); ++p) {
    if (!run->peers[p].node_id.empty()) peer_of_node[run->peers[p].node_id] = static_cast<int>(p);
  }
  absl::flat_hash_set<std::string> seen;
  for (const std::string& id : request.request_ids()) {
    run->ids.push_back(id);
    Route route;
    const std::optional<std::string> owner = OwnerNodeOf(id);
    if (local_.holds(id, caller) || (owner.has_value() && *owner == self_node_)) {
      route.local = true;
    } else if (owner.has_value() && peer_of_node.contains(*owner)) {
      route.peer = peer_of_node[*owner];
    }
    run->routes.push_back(route);
    if (!seen.insert(id).second) continue;
    if (route.local) {
      local->add_request_ids(id);
    } else if (route.peer >= 0) {
      (*forwarded)[route.peer].add_request_ids(id);
    } else {
      for (v1::PeerAbortRequest& to_peer : *forwarded) to_peer.add_request_ids(id);
    }
  }
}

void AbortRouter::Abort(const v1::AbortRequest& request, absl::Time client_deadline, AbortDone done,
                        const Caller& caller) {
  std::vector<PeerInfo> peers;
  if (peers_ != nullptr) peers = peers_->Peers();
  // Alone, or too many ids (the local abort refuses them): nothing to route.
  if (peers.empty() || request.request_ids_size() > kMaxAbortIdsPerCall) {
    local_.abort(request, client_deadline, std::move(done), caller);
    return;
  }
  auto run = std::make_shared<Run>();
  run->done = std::move(done);
  run->peers = std::move(peers);
  run->answers.assign(run->peers.size(), absl::UnknownError("no answer"));
  v1::AbortRequest local;
  std::vector<v1::PeerAbortRequest> forwarded(run->peers.size());
  RouteIds(request, caller, run.get(), &local, &forwarded);
  const absl::Time call_deadline = std::min(client_deadline, loop_->Now() + peer_timeout_);
  run->pending = 1;  // Released below, once every call is out.
  for (size_t p = 0; p < forwarded.size(); ++p) {
    if (forwarded[p].request_ids().empty()) continue;
    forwarded[p].set_caller(caller.identity);
    forwarded[p].set_caller_aborts_any(caller.abort_any);
    ++run->pending;
    peers_->Abort(run->peers[p].address, std::move(forwarded[p]), call_deadline,
                  [this, run, p, alive = alive_.watch()](
                      absl::StatusOr<v1::AbortResponse> answer) {
                    if (!alive) return;
                    if (on_peer_call_) on_peer_call_(answer.status().code());
                    if (answer.ok()) {
                      run->answers[p] = ByIdOf(*answer);
                    } else {
                      run->answers[p] = answer.status();
                    }
                    if (--run->pending == 0) Finish(run);
                  });
  }
  if (!local.request_ids().empty()) {
    ++run->pending;
    local_.abort(local, client_deadline,
                 [this, run, alive = alive_.watch()](
                     absl::StatusOr<v1::AbortResponse> answer) {
                   if (!alive) return;
                   if (answer.ok()) {
                     run->local = ByIdOf(*answer);
                   } else {
                     run->local_error = answer.status();
                   }
                   if (--run->pending == 0) Finish(run);
                 },
                 caller);
  }
  if (--run->pending == 0) Finish(run);
}

void AbortRouter::Finish(const std::shared_ptr<Run>& run) {
  if (!run->local_error.ok()) {
    run->done(run->local_error);
    return;
  }
  auto not_answered = [&](size_t p) {
    const PeerInfo& peer = run->peers[p];
    const absl::Status& why = run->answers[p].status();
    return absl::Status(
        why.code() == absl::StatusCode::kDeadlineExceeded ? why.code()
                                                          : absl::StatusCode::kUnavailable,
        absl::StrCat("peer orchestrator ", peer.address,
                     peer.node_id.empty() ? "" : absl::StrCat(" (node ", peer.node_id, ")"),
                     " did not answer the forwarded abort (", why.message(),
                     "); the request may still run there: retry the abort"));
  };
  v1::AbortResponse response;
  for (size_t i = 0; i < run->ids.size(); ++i) {
    const std::string& id = run->ids[i];
    const Route& route = run->routes[i];
    v1::AbortResult* result = response.add_results();
    if (route.local) {
      auto it = run->local.find(id);
      if (it != run->local.end()) {
        *result = it->second;
      } else {
        result->set_request_id(id);
        result->set_outcome(v1::AbortResult::OUTCOME_NOT_FOUND);
      }
      continue;
    }
    if (route.peer >= 0) {
      const absl::StatusOr<Outcomes>& answer = run->answers[route.peer];
      *result = answer.ok() && answer->contains(id) ? answer->at(id)
                                                     : Failed(id, not_answered(route.peer));
      continue;
    }
    std::optional<v1::AbortResult> aborted, failed;
    for (size_t p = 0; p < run->peers.size() && !aborted.has_value(); ++p) {
      const absl::StatusOr<Outcomes>& answer = run->answers[p];
      if (!answer.ok() || !answer->contains(id)) {
        if (!failed.has_value()) failed = Failed(id, not_answered(p));
        continue;
      }
      const v1::AbortResult& outcome = answer->at(id);
      if (outcome.outcome() == v1::AbortResult::OUTCOME_ABORTED) aborted = outcome;
      if (outcome.outcome() == v1::AbortResult::OUTCOME_FAILED && !failed.has_value()) {
        failed = outcome;
      }
    }
    if (aborted.has_value()) {
      *result = *aborted;
    } else if (failed.has_value()) {
      *result = *failed;
    } else {
      result->set_request_id(id);
      result->set_outcome(v1::AbortResult::OUTCOME_NOT_FOUND);
    }
  }
  run->done(std::move(response));
}

}  // namespace omnistage
