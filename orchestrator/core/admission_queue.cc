#include "orchestrator/core/admission_queue.h"

#include <algorithm>
#include <utility>

namespace omnistage {

QueueAddResult AdmissionQueue::Add(QueuedRequest request, size_t capacity) {
  QueueAddResult result;
  if (where_.size() >= capacity) {
    // Room only at the expense of a lower priority: its newest request goes.
    auto lowest = bands_.begin();
    if (lowest == bands_.end() || lowest->first >= request.priority) return result;
    const auto newest = std::prev(lowest->second.by_arrival.end());
    result.shed = newest->second;
    Erase(*result.shed);
  }
  const uint64_t sequence = next_sequence_++;
  Band& band = bands_[request.priority];
  auto found = band.flows.find(request.identity);
  if (found == band.flows.end()) {
    // A new identity joins the round just before the one whose turn it is.
    auto flow =
        band.ring.insert(band.cursor, Flow{request.identity, std::max(request.weight, 1), 0, {}});
    found = band.flows.emplace(request.identity, flow).first;
    if (band.cursor == band.ring.end()) band.cursor = band.ring.begin();
  }
  found->second->requests.emplace(std::make_tuple(!request.critical, request.deadline, sequence),
                                  request.id);
  band.by_arrival.emplace(sequence, request.id);
  where_[request.id] =
      Place{request.priority, sequence, request.deadline, request.critical, request.identity};
  result.queued = true;
  return result;
}

std::optional<std::string> AdmissionQueue::Pop() {
  if (bands_.empty()) return std::nullopt;
  Band& band = bands_.rbegin()->second;
  while (true) {
    if (band.cursor == band.ring.end()) band.cursor = band.ring.begin();
    Flow& flow = *band.cursor;
    if (!band.turn_started) {
      flow.deficit += flow.weight;
      band.turn_started = true;
    }
    if (flow.deficit >= 1) {
      --flow.deficit;
      std::string id = flow.requests.begin()->second;
      Erase(id);
      return id;
    }
    // Its turn is over: the next identity's begins.
    band.turn_started = false;
    ++band.cursor;
  }
}

bool AdmissionQueue::Remove(const std::string& id) {
  auto it = where_.find(id);
  if (it == where_.end()) return false;
  Erase(id);
  return true;
}

size_t AdmissionQueue::CountAt(int priority) const {
  auto it = bands_.find(priority);
  return it == bands_.end() ? 0 : it->second.by_arrival.size();
}

std::vector<std::string> AdmissionQueue::Ids() const {
  std::vector<std::string> ids;
  ids.reserve(where_.size());
  for (const auto& [id, place] : where_) ids.push_back(id);
  return ids;
}

std::vector<QueueLevel> AdmissionQueue::Levels() const {
  std::vector<QueueLevel> levels;
  for (auto band = bands_.rbegin(); band != bands_.rend(); ++band) {
    // From the identity whose turn it is.
    const Band& b = band->second;
    std::list<Flow>::const_iterator flow = b.cursor;
    if (flow == b.ring.end()) flow = b.ring.begin();
    for (size_t i = 0; i < b.ring.size(); ++i) {
      levels.push_back({band->first, flow->identity, flow->requests.size()});
      if (++flow == b.ring.end()) flow = b.ring.begin();
    }
  }
  return levels;
}

void AdmissionQueue::Erase(const std::string& id) {
  auto place = where_.find(id);
  auto band_it = bands_.find(place->second.priority);
  Band& band = band_it->second;
  band.by_arrival.erase(place->second.sequence);
  const auto flow = band.flows.at(place->second.identity);
  flow->requests.erase(
      std::make_tuple(!place->second.critical, place->second.deadline, place->second.sequence));
  if (flow->requests.empty()) EraseFlow(band, flow);
  if (band.by_arrival.empty()) bands_.erase(band_it);
  where_.erase(place);
}

void AdmissionQueue::EraseFlow(Band& band, std::list<Flow>::iterator flow) {
  // An identity with nothing waiting leaves the round and keeps no credit.
  if (band.cursor == flow) {
    band.cursor = std::next(flow);
    band.turn_started = false;
  }
  band.flows.erase(flow->identity);
  band.ring.erase(flow);
}

}  // namespace omnistage
