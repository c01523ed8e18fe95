#include "orchestrator/routing/replica_picker.h"

#include <optional>

#include "orchestrator/routing/prefix_pick.h"

namespace omnistage {

void ReplicaPicker::set_policy(PickPolicy policy, const PrefixPickOptions& prefix) {
  policy_ = policy;
  prefix_index_ = PrefixIndex(prefix);
}

PickDecision ReplicaPicker::Choose(const std::vector<int>& live,
                                   const std::vector<ReplicaState>& replicas,
                                   const PickContext& context) {
  PickDecision decision;
  if (!context.session.empty()) {
    const std::optional<int> last = sessions_.Last(context.session, context.now);
    if (last.has_value() && replicas[*last].live() &&
        (replicas[*last].capacity <= 0 || replicas[*last].load() < replicas[*last].slots())) {
      decision.replica = *last;
      decision.why = "session";
      return decision;
    }
  }
  switch (policy_) {
    case PickPolicy::kRoundRobin:
      decision.replica = live[rotation_ % live.size()];
      decision.why = "round_robin";
      return decision;
    case PickPolicy::kLeastLoaded:
      decision.replica = LeastLoaded(live, replicas);
      decision.why = "least_loaded";
      return decision;
    case PickPolicy::kPrefixAware:
      break;
  }
  static const google::protobuf::RepeatedPtrField<v1::Payload> kNoInput;
  InputBlocks input(context.input != nullptr ? *context.input : kNoInput);
  std::vector<int> order(live.size());
  for (size_t i = 0; i < live.size(); ++i) order[i] = live[(rotation_ + i) % live.size()];
  const PrefixChoice choice = ChooseByPrefix(
      prefix_index_, order,
      [&replicas](int r) { return static_cast<double>(replicas[r].load()) / replicas[r].slots(); },
      input, context.now);
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

void ReplicaPicker::Picked(int replica, const PickContext& context) {
  ++rotation_;
  if (!context.session.empty()) sessions_.Record(context.session, replica, context.now);
}

int ReplicaPicker::LeastLoaded(const std::vector<int>& live,
                               const std::vector<ReplicaState>& replicas) const {
  // Compares load / capacity as load_a * capacity_b < load_b * capacity_a.
  int best = live[rotation_ % live.size()];
  for (size_t i = 1; i < live.size(); ++i) {
    const int r = live[(rotation_ + i) % live.size()];
    if (replicas[r].load() * replicas[best].slots() < replicas[best].load() * replicas[r].slots()) {
      best = r;
    }
  }
  return best;
}

}  // namespace omnistage
