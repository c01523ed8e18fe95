#include "orchestrator/routing/prefix_pick.h"

#include <algorithm>
#include <limits>

#include "common/prefix_blocks.h"

namespace omnistage {

InputBlocks::InputBlocks(const google::protobuf::RepeatedPtrField<v1::Payload>& input)
    : input_(input) {
  text_ = std::any_of(input.begin(), input.end(),
                      [](const v1::Payload& p) { return p.kind_case() == v1::Payload::kText; });
  // Counted as BlockHasher counts them, without naming any block.
  int64_t bytes = 0;
  for (const v1::Payload& p : input) {
    if (text_ && p.kind_case() == v1::Payload::kText) bytes += p.text().text().size();
    if (!text_ && p.kind_case() == v1::Payload::kTokens) bytes += 4 * p.tokens().ids_size();
  }
  tokens_ = bytes / kTextBytesPerToken;
}

const std::vector<uint64_t>& InputBlocks::For(int block_tokens) {
  auto [it, added] = by_block_tokens_.try_emplace(block_tokens);
  if (!added) return it->second;
  BlockHasher hasher(text_ ? BlockHasher::Kind::kText : BlockHasher::Kind::kTokens,
                     block_tokens);
  for (const v1::Payload& p : input_) {
    if (text_ && p.kind_case() == v1::Payload::kText) hasher.Append(p.text().text());
    if (!text_ && p.kind_case() == v1::Payload::kTokens) hasher.Append(p.tokens().ids());
  }
  it->second = hasher.hashes();
  return it->second;
}

PrefixChoice ChooseByPrefix(const PrefixIndex& index, const std::vector<int>& order,
                            const std::function<double(int)>& load_per_slot, InputBlocks& input,
                            absl::Time now) {
  const PrefixPickOptions& options = index.options();
  PrefixChoice choice;
  choice.input_tokens = input.tokens();
  std::vector<double> load(order.size());
  for (size_t i = 0; i < order.size(); ++i) load[i] = load_per_slot(order[i]);
  const auto [least, most] = std::minmax_element(load.begin(), load.end());
  if (*most - *least > options.balance_threshold) {
    choice.replica = order[least - load.begin()];
    choice.why = PrefixChoice::Why::kLeastLoaded;
    choice.matched_tokens = int64_t{index.Matched(choice.replica,
                                                  input.For(index.block_tokens(choice.replica)),
                                                  now)} *
                            index.block_tokens(choice.replica);
    return choice;
  }
  double best = std::numeric_limits<double>::infinity();
  bool any_match = false;
  for (size_t i = 0; i < order.size(); ++i) {
    const int r = order[i];
    const int block_tokens = index.block_tokens(r);
    const int64_t matched = int64_t{index.Matched(r, input.For(block_tokens), now)} * block_tokens;
    any_match = any_match || matched > 0;
    const double cost =
        static_cast<double>(choice.input_tokens - matched) + options.load_cost_tokens * load[i];
    if (cost < best) {
      best = cost;
      choice.replica = r;
      choice.matched_tokens = matched;
    }
  }
  choice.why = any_match ? PrefixChoice::Why::kPrefix : PrefixChoice::Why::kNoMatch;
  return choice;
}

}  // namespace omnistage
