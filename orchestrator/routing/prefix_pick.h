// The prefix-aware pick (PickPolicy::kPrefixAware; docs/routing.md): of a
// stage's live replicas, the one where a request's input costs least.
//
// For input of T tokens, a replica r that most likely holds its first M_r
// tokens (PrefixIndex, whole blocks) and carries load u_r per slot (its
// reported load plus what was sent since, over its capacity) costs
//
//     cost(r) = (T - M_r) + load_cost_tokens * u_r
//
// tokens of prefill: the prefill it would not save, plus its load. The lowest
// cost wins; ties go to the first in `order` (the pool's round-robin
// rotation). While the replicas are out of balance (max u - min u above
// balance_threshold) the least loaded wins instead, whatever it caches, so a
// popular prefix cannot pile every request onto one replica.
//
// Not thread-safe: on the event loop, inside StagePool::Pick.
#ifndef OMNISTAGE_ORCHESTRATOR_ROUTING_PREFIX_PICK_H_
#define OMNISTAGE_ORCHESTRATOR_ROUTING_PREFIX_PICK_H_

#include <cstdint>
#include <functional>
#include <map>
#include <vector>

#include "absl/time/time.h"
#include "google/protobuf/repeated_ptr_field.h"
#include "orchestrator/config/pick_policy.h"
#include "orchestrator/routing/prefix_index.h"
#include "protos/common.pb.h"

namespace omnistage {

// A request's input as cache blocks, named for each block size asked (a
// stage's replicas may use different ones). Its text payloads, or, with none,
// its token payloads. Holds a reference to `input`: use it while that lives.
class InputBlocks {
 public:
  explicit InputBlocks(const google::protobuf::RepeatedPtrField<v1::Payload>& input);

  const std::vector<uint64_t>& For(int block_tokens);
  // The input's length in tokens (text: common/prefix_blocks.h's count).
  int64_t tokens() const { return tokens_; }

 private:
  const google::protobuf::RepeatedPtrField<v1::Payload>& input_;
  bool text_ = false;
  int64_t tokens_ = 0;
  std::map<int, std::vector<uint64_t>> by_block_tokens_;
};

struct PrefixChoice {
  enum class Why {
    kPrefix,       // the lowest cost, with some of its input cached there
    kNoMatch,      // the lowest cost, with nothing cached anywhere
    kLeastLoaded,  // out of balance
  };
  int replica = -1;
  Why why = Why::kNoMatch;
  int64_t matched_tokens = 0;  // on the chosen replica
  int64_t input_tokens = 0;
};

// By `index` and its options. `order`: the live replicas, not empty, in the
// order ties are broken. `load_per_slot(r)`: u_r above.
PrefixChoice ChooseByPrefix(const PrefixIndex& index, const std::vector<int>& order,
                            const std::function<double(int)>& load_per_slot, InputBlocks& input,
                            absl::Time now);

}  // namespace omnistage

#endif  // OMNISTAGE_ORCHESTRATOR_ROUTING_PREFIX_PICK_H_
