// LruMap: a map that knows in which order its keys were last touched, so that
// the oldest can be let go first (the prefix index's blocks per replica, the
// sessions' last replicas).
//
//   LruMap<std::string, int> sessions;
//   sessions.Touch("conversation-7", now) = 2;   // most recent now
//   while (sessions.size() > cap) sessions.PopOldest();
//
// Costs: Touch, Find, Erase, PopOldest O(1) (amortized). Not thread-safe.
#ifndef OMNISTAGE_ORCHESTRATOR_ROUTING_LRU_MAP_H_
#define OMNISTAGE_ORCHESTRATOR_ROUTING_LRU_MAP_H_

#include <cstddef>
#include <list>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/time/time.h"

namespace omnistage {

template <typename K, typename V>
class LruMap {
 public:
  struct Entry {
    K key;
    V value;
    absl::Time touched;
  };

  // The value of `key` (value-initialized when new), made the most recent.
  V& Touch(const K& key, absl::Time now) {
    auto it = index_.find(key);
    if (it != index_.end()) {
      order_.splice(order_.begin(), order_, it->second);
    } else {
      order_.push_front(Entry{key, V{}, now});
      index_.emplace(key, order_.begin());
    }
    order_.front().touched = now;
    return order_.front().value;
  }
  // Null when absent; the order does not change.
  const Entry* Find(const K& key) const {
    auto it = index_.find(key);
    return it == index_.end() ? nullptr : &*it->second;
  }
  bool Erase(const K& key) {
    auto it = index_.find(key);
    if (it == index_.end()) return false;
    order_.erase(it->second);
    index_.erase(it);
    return true;
  }
  // The least recently touched; null when empty.
  const Entry* Oldest() const { return order_.empty() ? nullptr : &order_.back(); }
  void PopOldest() {
    if (order_.empty()) return;
    index_.erase(order_.back().key);
    order_.pop_back();
  }
  size_t size() const { return index_.size(); }
  void clear() {
    index_.clear();
    order_.clear();
  }

 private:
  std::list<Entry> order_;  // most recent first
  absl::flat_hash_map<K, typename std::list<Entry>::iterator> index_;
};

}  // namespace omnistage

#endif  // OMNISTAGE_ORCHESTRATOR_ROUTING_LRU_MAP_H_
