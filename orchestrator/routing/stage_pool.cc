#include "orchestrator/routing/stage_pool.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/prefix_blocks.h"

namespace omnistage {

absl::Status PoolAbortResult::status() const {
  if (failures.empty()) return absl::OkStatus();
  const ReplicaAbortFailure& first = failures.front();
  return absl::Status(first.status.code(),
                      absl::StrCat("stage ", this->stage, " replica ", first.replica,
                                   ": abort failed: ", first.status.message()));
}

StagePool::StagePool(int stage_id, std::vector<ReplicaClient*> replicas, bool alive)
    : stage_id_(stage_id),
      replicas_(std::move(replicas)),
      states_(replicas_.size()),
      bound_(replicas_.size()) {
  for (ReplicaState& state : states_) state.alive = alive;
}

// ---- Bindings --------------------------------------------------------------------

void StagePool::Bind(const std::string& request_id, int replica) {
  AccrueBusy();
  const Binding binding{replica, next_generation_++};
  auto [it, added] = bindings_.emplace(request_id, binding);
  const int previous = it->second.replica;
  ++entries_;
  if (!added) {
    ++departures_;
    bound_[previous].erase(request_id);
    it->second = binding;
  }
  bound_[replica].insert(request_id);
  if (!added) CheckIdle(previous);
}

std::vector<std::string> StagePool::StillBound(const BindingRefs& refs) const {
  std::vector<std::string> ids;
  for (const auto& [id, generation] : refs) {
    auto it = bindings_.find(id);
    if (it != bindings_.end() && it->second.generation == generation) ids.push_back(id);
  }
  return ids;
}

std::optional<int> StagePool::Bound(const std::string& request_id) const {
  auto it = bindings_.find(request_id);
  if (it == bindings_.end()) return std::nullopt;
  return it->second.replica;
}

void StagePool::Release(const std::string& request_id) {
  auto it = bindings_.find(request_id);
  if (it == bindings_.end()) return;
  AccrueBusy();
  const int replica = it->second.replica;
  bound_[replica].erase(request_id);
  bindings_.erase(it);
  ++departures_;
  CheckIdle(replica);
}

std::vector<std::string> StagePool::Evict(int replica) {
  AccrueBusy();
  states_[replica].alive = false;
  std::vector<std::string> affected(bound_[replica].begin(), bound_[replica].end());
  for (const std::string& id : affected) bindings_.erase(id);
  departures_ += affected.size();
  bound_[replica].clear();
  std::sort(affected.begin(), affected.end());
  CheckIdle(replica);
  return affected;
}

void StagePool::Revive(int replica) {
  // A new incarnation holds none of the old state.
  Evict(replica);
  states_[replica].alive = true;
  states_[replica].draining = false;
}

std::vector<int> StagePool::LiveReplicas() const {
  std::vector<int> replicas;
  for (int i = 0; i < size(); ++i) {
    if (IsLive(i)) replicas.push_back(i);
  }
  return replicas;
}

bool StagePool::HasLiveReplica() const {
  for (int i = 0; i < size(); ++i) {
    if (IsLive(i)) return true;
  }
  return false;
}

// ---- Membership ------------------------------------------------------------------

int StagePool::Add(ReplicaClient* client, std::string address, std::string origin) {
  replicas_.push_back(client);
  states_.emplace_back();
  states_.back().address = std::move(address);
  states_.back().origin = std::move(origin);
  bound_.emplace_back();
  return size() - 1;
}

void StagePool::Retire(int replica, std::function<void()> idle) {
  states_[replica].retiring = true;
  idle_[replica] = std::move(idle);
  CheckIdle(replica);
}

void StagePool::Unretire(int replica) {
  states_[replica].retiring = false;
  idle_.erase(replica);
}

void StagePool::CheckIdle(int replica) {
  if (!states_[replica].retiring || !bound_[replica].empty()) return;
  auto it = idle_.find(replica);
  if (it == idle_.end()) return;
  std::function<void()> idle = std::move(it->second);
  idle_.erase(it);
  idle();
}

void StagePool::Remove(int replica) {
  ReplicaState& state = states_[replica];
  state.alive = false;
  state.retiring = true;
  state.removed = true;
  replicas_[replica] = nullptr;
  idle_.erase(replica);
  picker_.prefix_index().Forget(replica);
}

// ---- Abort -----------------------------------------------------------------------

struct StagePool::AbortRun {
  int pending = 0;
  // Each failed call (its ids filled in at the end), with the bindings it was for.
  std::vector<std::pair<ReplicaAbortFailure, BindingRefs>> failures;
  std::function<void(PoolAbortResult)> done;
};

void StagePool::Abort(const std::vector<std::string>& request_ids, absl::Time call_deadline,
                      std::function<void(PoolAbortResult)> done) {
  // Replica -> the bindings of its ids, in replica order and, within a group, in
  // the order given.
  std::map<int, BindingRefs> groups;
  absl::flat_hash_set<std::string> seen;
  for (const std::string& id : request_ids) {
    auto it = bindings_.find(id);
    if (it == bindings_.end()) continue;  // Unbound: nothing to stop here.
    if (seen.insert(id).second) groups[it->second.replica].emplace_back(id, it->second.generation);
  }
  auto run = std::make_shared<AbortRun>();
  run->done = std::move(done);
  run->pending = static_cast<int>(groups.size()) + 1;  // +1 until every call is out.
  auto finish_one = [self = shared_from_this(), run] {
    if (--run->pending > 0) return;
    // A binding evicted or released after its call failed holds nothing more:
    // what it held already ended (and the id may be another request's now).
    PoolAbortResult result;
    result.stage = self->stage_id_;
    for (auto& [failure, refs] : run->failures) {
      failure.ids = self->StillBound(refs);
      if (!failure.ids.empty()) result.failures.push_back(std::move(failure));
    }
    std::sort(result.failures.begin(), result.failures.end(),
              [](const ReplicaAbortFailure& a, const ReplicaAbortFailure& b) {
                return a.replica < b.replica;
              });
    run->done(std::move(result));
  };
  for (auto& [replica, refs] : groups) {
    auto group = std::make_shared<BindingRefs>(std::move(refs));
    std::vector<std::string> ids;
    ids.reserve(group->size());
    for (const auto& [id, generation] : *group) ids.push_back(id);
    on_abort_call_(replica);
    replicas_[replica]->Abort(
        ids, call_deadline,
        [self = shared_from_this(), run, replica = replica, group,
         finish_one](absl::StatusOr<std::vector<std::string>> stopped) {
          // Only the bindings the call was made for count: an eviction or a
          // release (and a new binding of the id, maybe to this same replica)
          // may have happened while it was in flight.
          if (stopped.ok()) {
            for (const std::string& id : self->StillBound(*group)) self->Release(id);
            const size_t carried = group->size();
            const size_t live = std::min(stopped->size(), carried);
            self->on_abort_answer_(replica, live, carried - live);
          } else {
            run->failures.emplace_back(ReplicaAbortFailure{replica, stopped.status(), {}}, *group);
          }
          finish_one();
        });
  }
  finish_one();
}

// ---- Replica identity and health ------------------------------------------------

void StagePool::Admit(int replica, const v1::Ready& ready) {
  AccrueBusy();
  ReplicaState& state = states_[replica];
  state.instance_id = ready.instance_id();
  state.capacity = ready.capacity();
  if (ready.capacity() > 0) last_capacity_ = ready.capacity();
  state.max_message_bytes = ready.max_message_bytes();
  state.resume = ready.resume();
  state.streamed_input = ready.streamed_input();
  state.playback_deadlines = ready.playback_deadlines();
  state.down_reason = absl::OkStatus();
  state.last_error.clear();
  state.others_load = 0;  // Until its first report.
  if (picker_.policy() == PickPolicy::kPrefixAware && picker_.prefix_index().options().precise &&
      ready.prefix_cache().block_tokens() > 0 &&
      ready.prefix_cache().block_tokens() <= kMaxBlockTokens) {
    picker_.prefix_index().SetPrecise(replica, ready.prefix_cache().block_tokens(),
                                      ready.prefix_cache().capacity_blocks());
    picker_.prefix_index().Apply(replica, ready.load().cache());
  } else {
    picker_.prefix_index().Forget(replica);
  }
  Revive(replica);
}

std::vector<std::string> StagePool::MarkDown(int replica, const absl::Status& reason) {
  states_[replica].down_reason = reason;
  states_[replica].last_error = std::string(reason.message());
  picker_.prefix_index().Forget(replica);  // What comes back starts cold.
  return Evict(replica);
}

void StagePool::AppendStatus(v1::StageStatus* stage, absl::Time now) const {
  stage->set_discovery_error(discovery_error_);
  for (int r = 0; r < size(); ++r) {
    const ReplicaState& state = states_[r];
    if (state.removed) continue;
    v1::ReplicaStatus* replica = stage->add_replicas();
    replica->set_replica(r);
    replica->set_address(state.address);
    replica->set_alive(state.alive);
    replica->set_origin(state.origin);
    replica->set_retiring(state.retiring);
    replica->set_state(!state.alive                       ? v1::ReplicaStatus::STATE_DEAD
                       : state.draining || state.retiring ? v1::ReplicaStatus::STATE_DRAINING
                                                          : v1::ReplicaStatus::STATE_LIVE);
    replica->set_instance_id(state.instance_id);
    replica->set_streamed_input(state.streamed_input);
    replica->set_capacity(state.capacity);
    replica->set_bound_requests(BoundCount(r));
    replica->set_last_error(state.last_error);
    replica->set_max_message_bytes(state.max_message_bytes);
    replica->set_load_requests(state.load_requests);
    replica->set_load_age_ms(state.load_at == absl::InfinitePast()
                                 ? -1
                                 : absl::ToInt64Milliseconds(now - state.load_at));
    if (picker_.policy() == PickPolicy::kPrefixAware) {
      replica->set_prefix_index(picker_.prefix_index().precise(r) ? "precise" : "approximate");
      replica->set_prefix_blocks(picker_.prefix_index().blocks(r));
    }
  }
}

// ---- Sends ------------------------------------------------------------------------

SubmitResult StagePool::Submit(v1::AddRequest* add, const Prepare& prepare, PickContext context) {
  const std::string id = add->request_id();
  context.input = &add->input();
  SubmitResult result;
  while (true) {
    absl::StatusOr<int> replica = Pick(id, context);
    if (!replica.ok()) {
      result.status = replica.status();
      result.replica = -1;
      return result;
    }
    result.replica = *replica;
    if (prepare) {
      result.status = prepare(states_[*replica], add);
      if (!result.status.ok()) {
        Release(id);
        return result;
      }
    }
    result.status = replicas_[*replica]->Add(add);
    if (result.status.ok()) return result;
    Release(id);  // A failed send leaves no binding.
    if (result.status.code() != absl::StatusCode::kUnavailable) return result;
    // The session closed before its end reached us: the replica is gone for
    // every request bound to it, and this one has lost nothing.
    result.lost.push_back(ReplicaLoss{*replica, result.status, MarkDown(*replica, result.status)});
  }
}

absl::Status StagePool::Append(v1::AppendInput input, std::optional<ReplicaLoss>* lost) {
  const std::optional<int> replica = Bound(input.request_id());
  if (!replica.has_value()) {
    return absl::NotFoundError(
        absl::StrCat("'", input.request_id(), "' is not bound on stage ", stage_id_));
  }
  absl::Status status = replicas_[*replica]->AppendInput(std::move(input));
  if (status.code() == absl::StatusCode::kUnavailable) {
    *lost = ReplicaLoss{*replica, status, MarkDown(*replica, status)};
  }
  return status;
}

void StagePool::SendPlaybackDeadline(const std::string& request_id, absl::Duration slack) {
  const std::optional<int> replica = Bound(request_id);
  if (!replica.has_value() || !states_[*replica].alive || !states_[*replica].playback_deadlines) {
    return;
  }
  v1::PlaybackDeadlines deadlines;
  v1::PlaybackDeadline* deadline = deadlines.add_deadlines();
  deadline->set_request_id(request_id);
  deadline->set_slack_ms(absl::ToInt64Milliseconds(slack));
  // Advice: a replica that cannot take it now is lost or refuses it for a
  // reason the next command finds out.
  (void)replicas_[*replica]->SetPlaybackDeadlines(std::move(deadlines));
}

void StagePool::CallUtility(const std::string& name, const google::protobuf::ListValue& args,
                            std::function<void(UtilityResults)> done) {
  struct Gather {
    UtilityResults results;
    int pending = 0;
    std::function<void(UtilityResults)> done;
  };
  auto gather = std::make_shared<Gather>();
  for (int r = 0; r < size(); ++r) {
    if (!states_[r].removed)
      gather->results.emplace_back(r, absl::UnavailableError("is not alive"));
  }
  gather->done = std::move(done);
  gather->pending = static_cast<int>(gather->results.size()) + 1;  // +1 until every call is out.
  auto finish_one = [gather] {
    if (--gather->pending == 0) gather->done(std::move(gather->results));
  };
  for (size_t i = 0; i < gather->results.size(); ++i) {
    const int r = gather->results[i].first;
    if (!alive(r)) {
      finish_one();
      continue;
    }
    replicas_[r]->CallUtility(name, args,
                              [gather, i, finish_one](absl::StatusOr<google::protobuf::Value> v) {
                                gather->results[i].second = std::move(v);
                                finish_one();
                              });
  }
  finish_one();
}

// ---- Picks and load ---------------------------------------------------------------

absl::StatusOr<int> StagePool::Pick(const std::string& request_id, const PickContext& context) {
  auto it = bindings_.find(request_id);
  if (it != bindings_.end() && alive(it->second.replica)) return it->second.replica;
  std::vector<int> live = LiveReplicas();
  if (live.empty()) {
    return absl::UnavailableError(absl::StrCat("stage ", stage_id_, " has no live replica"));
  }
  if (!context.avoid.empty()) {
    std::vector<int> kept;
    for (int replica : live) {
      if (std::find(context.avoid.begin(), context.avoid.end(), replica) == context.avoid.end()) {
        kept.push_back(replica);
      }
    }
    if (!kept.empty()) live = std::move(kept);
  }
  const PickDecision decision = picker_.Choose(live, states_, context);
  const int replica = decision.replica;
  picker_.Picked(replica, context);
  ++states_[replica].sent_since_load;
  Bind(request_id, replica);
  on_pick_(decision);
  return replica;
}

void StagePool::ReportLoad(int replica, int requests, absl::Time at) {
  ReplicaState& state = states_[replica];
  state.load_requests = std::max(requests, 0);
  state.load_at = at;
  state.sent_since_load = 0;
  // A request just sent may not be counted yet, one just finished may be
  // counted still: others' share is an estimate, never below zero.
  state.others_load = std::max(0, state.load_requests - BoundCount(replica));
}

void StagePool::ReportCache(int replica, const v1::CacheEvents& events) {
  picker_.prefix_index().Apply(replica, events);
}

bool StagePool::HasFreeSlot(int headroom) const {
  // Per admitted request: no list is built.
  for (int r = 0; r < size(); ++r) {
    if (!IsLive(r)) continue;
    const ReplicaState& state = states_[r];
    if (state.capacity <= 0) return true;
    if (BoundCount(r) + state.others_load < state.capacity + headroom) return true;
  }
  return false;
}

bool StagePool::HasBatchSlot(double reserve) const {
  for (int r = 0; r < size(); ++r) {
    if (!IsLive(r)) continue;
    const ReplicaState& state = states_[r];
    if (state.capacity <= 0) return true;
    const int slots = std::max(1, static_cast<int>(std::floor(state.capacity * (1 - reserve))));
    if (BoundCount(r) + state.others_load < slots) return true;
  }
  return false;
}

StageLoad StagePool::Load() const {
  StageLoad load;
  load.held = HeldWithinCapacity();
  int reported = 0;  // Alive replicas that report a capacity.
  int64_t slots = 0;
  for (int r = 0; r < size(); ++r) {
    const ReplicaState& state = states_[r];
    if (!state.alive) continue;
    if (IsLive(r)) ++load.live_replicas;
    const int bound = BoundCount(r);
    if (state.capacity <= 0) {
      load.capacity += bound;
      continue;
    }
    ++reported;
    slots += state.capacity;
    load.waiting += std::max(0, bound - state.capacity);
    load.capacity += state.capacity;
  }
  load.slots_per_replica = reported > 0 ? static_cast<int>((slots + reported - 1) / reported)
                                        : std::max(1, last_capacity_);
  load.entries = entries_;
  load.departures = departures_;
  if (now_) {
    load.busy_slot_seconds =
        busy_slot_seconds_ + load.held * absl::ToDoubleSeconds(now_() - busy_since_);
  }
  return load;
}

int StagePool::HeldWithinCapacity() const {
  int held = 0;
  for (int r = 0; r < size(); ++r) {
    if (!states_[r].alive) continue;
    const int capacity = states_[r].capacity;
    held += capacity > 0 ? std::min(BoundCount(r), capacity) : BoundCount(r);
  }
  return held;
}

void StagePool::AccrueBusy() {
  if (!now_) return;
  const absl::Time now = now_();
  busy_slot_seconds_ += HeldWithinCapacity() * absl::ToDoubleSeconds(now - busy_since_);
  busy_since_ = now;
}

}  // namespace omnistage
