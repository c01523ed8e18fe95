// AdmissionQueue: the requests an orchestrator holds while stage 0 has no free
// slot, and the order they leave in (docs/architecture.md, "The admission
// queue"):
//
// 1. Priority: a higher priority leaves first, always.
// 2. Fair share within a priority: deficit round robin over the identities that
//    have requests waiting, each request costing 1 and each identity's quantum
//    its weight. While identities A and B both have requests waiting, the
//    numbers that leave differ from the ratio of their weights by at most one
//    round's quantum (max(weight_A, weight_B) + 1 requests), however many each
//    has waiting: a flood from one identity delays another only by its share.
// 3. Within an identity, critical requests first (their criticality), then
//    the earliest deadline (a request's latency objective,
//    latency_objectives.h), then arrival; a request without a deadline after
//    those with one.
//
// Bounded: Add() to a full queue sheds the newest request of the lowest
// priority below the arrival's, or refuses the arrival when none is lower.
//
//   AdmissionQueue queue;
//   queue.Add({"r1", "alice", /*priority=*/0, /*weight=*/1}, /*capacity=*/100);
//   std::optional<std::string> next = queue.Pop();   // "r1"
//
// Costs: Add and Remove O(log n); Pop O(1) amortized (a round visits each
// waiting identity once, however small its weight relative to the others:
// weights are whole numbers of at least 1).
//
// Not thread-safe: owned by the orchestrator's event loop.
#ifndef OMNISTAGE_ORCHESTRATOR_CORE_ADMISSION_QUEUE_H_
#define OMNISTAGE_ORCHESTRATOR_CORE_ADMISSION_QUEUE_H_

#include <cstdint>
#include <list>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/time/time.h"

namespace omnistage {

struct QueuedRequest {
  std::string id;
  // Who it is for fair sharing ("" for every unauthenticated caller).
  std::string identity;
  // Higher leaves first.
  int priority = 0;
  // The identity's share within its priority; at least 1.
  int weight = 1;
  // When its latency objective runs out; InfiniteFuture: it has none.
  absl::Time deadline = absl::InfiniteFuture();
  // Its criticality is critical: before the identity's others.
  bool critical = false;
};

// How many requests of one identity wait at one priority.
struct QueueLevel {
  int priority = 0;
  std::string identity;
  size_t waiting = 0;
};

struct QueueAddResult {
  // False: the queue is full of requests of at least the arrival's priority;
  // the arrival is refused.
  bool queued = false;
  // The request that made room for the arrival (it leaves the queue).
  std::optional<std::string> shed;
};

class AdmissionQueue {
 public:
  // Queues `request` unless `capacity` requests wait already (see above). Its
  // id must not be queued already.
  QueueAddResult Add(QueuedRequest request, size_t capacity);
  // The next request to send, taken out of the queue; nullopt when empty.
  std::optional<std::string> Pop();
  // Takes `id` out (aborted, cancelled, expired); false when it is not queued.
  bool Remove(const std::string& id);

  bool Contains(const std::string& id) const { return where_.count(id) > 0; }
  size_t size() const { return where_.size(); }
  bool empty() const { return where_.empty(); }
  // How many wait at `priority`.
  size_t CountAt(int priority) const;
  // Every queued id, in no particular order.
  std::vector<std::string> Ids() const;
  // Per priority (highest first) and identity (in round-robin order).
  std::vector<QueueLevel> Levels() const;

 private:
  // One identity's waiting requests within one priority.
  struct Flow {
    std::string identity;
    int weight = 1;
    int64_t deficit = 0;
    // (not critical, deadline, arrival sequence) -> id, the next to leave
    // first.
    std::map<std::tuple<bool, absl::Time, uint64_t>, std::string> requests;
  };
  // One priority's identities, in round-robin order.
  struct Band {
    std::list<Flow> ring;
    std::list<Flow>::iterator cursor = ring.end();
    // Whether the flow at `cursor` got its quantum for this turn.
    bool turn_started = false;
    std::map<std::string, std::list<Flow>::iterator> flows;
    // Arrival sequence -> id, for shedding the newest.
    std::map<uint64_t, std::string> by_arrival;
  };
  struct Place {
    int priority = 0;
    uint64_t sequence = 0;
    absl::Time deadline;
    bool critical = false;
    std::string identity;
  };

  // Takes request `id` out of its flow and band.
  void Erase(const std::string& id);
  void EraseFlow(Band& band, std::list<Flow>::iterator flow);

  // Highest priority last.
  std::map<int, Band> bands_;
  std::map<std::string, Place> where_;
  uint64_t next_sequence_ = 0;
};

}  // namespace omnistage

#endif  // OMNISTAGE_ORCHESTRATOR_CORE_ADMISSION_QUEUE_H_
