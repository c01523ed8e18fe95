// StagePool's picks (stage_pool.h): where an unbound request goes, by the
// stage's policy or its session, and the load and cache reports they read.
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "orchestrator/routing/prefix_pick.h"
#include "orchestrator/routing/stage_pool.h"

namespace omnistage {

absl::StatusOr<int> StagePool::Pick(const std::string& request_id, const PickContext& context) {
  auto it = bindings_.find(request_id);
  if (it != bindings_.end() && alive(it->second.replica)) return it->second.replica;
  const std::vector<int> live = LiveReplicas();
  if (live.empty()) {
    return absl::UnavailableError(absl::StrCat("stage ", stage_id_, " has no live replica"));
  }
  const PickDecision decision = Choose(live, context);
  const int replica = decision.replica;
  ++rr_;
  ++states_[replica].sent_since_load;
  Bind(request_id, replica);
  if (!context.session.empty()) sessions_.Record(context.session, replica, context.now);
  on_pick_(decision);
  return replica;
}

PickDecision StagePool::Choose(const std::vector<int>& live, const PickContext& context) {
  PickDecision decision;
  if (!context.session.empty()) {
    const std::optional<int> last = sessions_.Last(context.session, context.now);
    if (last.has_value() && IsLive(*last) &&
        (states_[*last].capacity <= 0 || LoadOf(*last) < CapacityOf(*last))) {
      decision.replica = *last;
      decision.why = "session";
      return decision;
    }
  }
  switch (pick_) {
    case PickPolicy::kRoundRobin:
      decision.replica = live[rr_ % live.size()];
      decision.why = "round_robin";
      return decision;
    case PickPolicy::kLeastLoaded:
      decision.replica = LeastLoaded(live);
      decision.why = "least_loaded";
      return decision;
    case PickPolicy::kPrefixAware:
      break;
  }
  static const google::protobuf::RepeatedPtrField<v1::Payload> kNoInput;
  InputBlocks input(context.input != nullptr ? *context.input : kNoInput);
  std::vector<int> order(live.size());
  for (size_t i = 0; i < live.size(); ++i) order[i] = live[(rr_ + i) % live.size()];
  const PrefixChoice choice = ChooseByPrefix(
      prefix_index_, order,
      [this](int r) { return static_cast<double>(LoadOf(r)) / CapacityOf(r); }, input,
      context.now);
  prefix_index_.Routed(choice.replica, input.For(prefix_index_.block_tokens(choice.replica)),
                       context.now);
  decision.replica = choice.replica;
  decision.why = choice.why == PrefixChoice::Why::kPrefix    ? "prefix"
                 : choice.why == PrefixChoice::Why::kNoMatch ? "no_match"
                                                             : "balance";
  decision.matched_tokens = choice.matched_tokens;
  decision.input_tokens = choice.input_tokens;
  return decision;
}

int64_t StagePool::LoadOf(int replica) const {
  return int64_t{states_[replica].load_requests} + states_[replica].sent_since_load;
}

int64_t StagePool::CapacityOf(int replica) const {
  return int64_t{std::max(states_[replica].capacity, 1)};
}

int StagePool::LeastLoaded(const std::vector<int>& live) const {
  // Compares load / capacity as load_a * capacity_b < load_b * capacity_a.
  int best = live[rr_ % live.size()];
  for (size_t i = 1; i < live.size(); ++i) {
    const int r = live[(rr_ + i) % live.size()];
    if (LoadOf(r) * CapacityOf(best) < LoadOf(best) * CapacityOf(r)) best = r;
  }
  return best;
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
  prefix_index_.Apply(replica, events);
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
