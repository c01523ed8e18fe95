#include "orchestrator/routing/prefix_index.h"

#include <algorithm>
#include <cstddef>
#include <vector>

namespace omnistage {
namespace {

// A replica may report more than its declared capacity for a moment (stored
// before the matching evictions); past twice that, or past this, reports are
// not believed further.
constexpr int64_t kMaxReportedBlocks = int64_t{1} << 22;

}  // namespace

PrefixIndex::Replica& PrefixIndex::At(int replica) {
  if (replica >= static_cast<int>(replicas_.size())) replicas_.resize(replica + 1);
  return replicas_[replica];
}

const PrefixIndex::Replica* PrefixIndex::Find(int replica) const {
  return replica >= 0 && replica < static_cast<int>(replicas_.size()) ? &replicas_[replica]
                                                                      : nullptr;
}

void PrefixIndex::Routed(int replica, absl::Span<const uint64_t> blocks, absl::Time now) {
  Replica& r = At(replica);
  if (r.precise) return;
  // The deepest first, so that the first block is the most recent of all and
  // the cap lets the deepest go first.
  for (auto it = blocks.rbegin(); it != blocks.rend(); ++it) {
    r.routed[*it] = Replica::Routing{++r.next_order, now};
  }
  if (static_cast<int64_t>(r.routed.size()) > options_.index_blocks_per_replica) Shrink(r, now);
}

void PrefixIndex::Shrink(Replica& replica, absl::Time now) const {
  const absl::Time expired = now - options_.index_ttl;
  absl::erase_if(replica.routed, [&](const auto& entry) { return entry.second.at < expired; });
  const size_t keep = static_cast<size_t>(options_.index_blocks_per_replica * 9 / 10);
  if (replica.routed.size() <= keep) return;
  std::vector<uint64_t> orders;
  orders.reserve(replica.routed.size());
  for (const auto& [block, routing] : replica.routed) orders.push_back(routing.order);
  // The order of the keep-th most recent: everything older goes.
  auto cutoff = orders.end() - static_cast<std::ptrdiff_t>(keep);
  std::nth_element(orders.begin(), cutoff, orders.end());
  const uint64_t oldest_kept = *cutoff;
  absl::erase_if(replica.routed,
                 [&](const auto& entry) { return entry.second.order < oldest_kept; });
}

void PrefixIndex::SetPrecise(int replica, int block_tokens, int capacity_blocks) {
  Replica& r = At(replica);
  r = Replica();
  r.precise = true;
  r.block_tokens = block_tokens;
  r.capacity_blocks = std::min<int64_t>(2 * int64_t{std::max(capacity_blocks, 1)},
                                        kMaxReportedBlocks);
}

void PrefixIndex::Apply(int replica, const v1::CacheEvents& events) {
  Replica& r = At(replica);
  if (!r.precise) return;
  if (events.snapshot()) r.reported.clear();
  for (uint64_t block : events.evicted()) r.reported.erase(block);
  for (uint64_t block : events.stored()) {
    if (static_cast<int64_t>(r.reported.size()) >= r.capacity_blocks) break;
    r.reported.insert(block);
  }
}

void PrefixIndex::Forget(int replica) {
  if (Find(replica) != nullptr) replicas_[replica] = Replica();
}

bool PrefixIndex::Holds(const Replica& replica, uint64_t block, absl::Time now) const {
  if (replica.precise) return replica.reported.contains(block);
  auto it = replica.routed.find(block);
  return it != replica.routed.end() && it->second.at >= now - options_.index_ttl;
}

int PrefixIndex::Matched(int replica, absl::Span<const uint64_t> blocks, absl::Time now) const {
  const Replica* r = Find(replica);
  if (r == nullptr || blocks.empty()) return 0;
  // The largest n such that the replica holds blocks[n - 1].
  int low = 0;  // held: blocks[0..low)
  int high = static_cast<int>(blocks.size());
  while (low < high) {
    const int mid = low + (high - low + 1) / 2;  // 1..high
    if (Holds(*r, blocks[mid - 1], now)) {
      low = mid;
    } else {
      high = mid - 1;
    }
  }
  return low;
}

int PrefixIndex::block_tokens(int replica) const {
  const Replica* r = Find(replica);
  return r != nullptr && r->precise ? r->block_tokens : options_.block_tokens;
}

bool PrefixIndex::precise(int replica) const {
  const Replica* r = Find(replica);
  return r != nullptr && r->precise;
}

int64_t PrefixIndex::blocks(int replica) const {
  const Replica* r = Find(replica);
  if (r == nullptr) return 0;
  return static_cast<int64_t>(r->precise ? r->reported.size() : r->routed.size());
}

}  // namespace omnistage
