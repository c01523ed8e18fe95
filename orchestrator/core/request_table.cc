#include "orchestrator/core/request_table.h"

#include <utility>

#include "common/invariant.h"

namespace omnistage {

InFlightRequest* RequestTable::Find(const std::string& id) const {
  auto it = requests_.find(id);
  return it == requests_.end() ? nullptr : it->second.get();
}

InFlightRequest* RequestTable::Add(std::unique_ptr<InFlightRequest> request) {
  const std::string id = request->id;
  auto [it, fresh] = requests_.try_emplace(id, std::move(request));
  // try_emplace leaves `request` as it was when the id is taken.
  if (!OMNISTAGE_INVARIANT_HOLDS(fresh, (LogContext{id, -1, -1, ""}),
                                 "a request id was admitted while already in flight")) {
    request->sink->Fail(absl::InternalError(
        "internal error: the request id was already in flight (a bug, logged and counted)"));
    return nullptr;
  }
  ++per_caller_[it->second->caller];
  if (it->second->wants_audio && !it->second->queued) ++running_audio_;
  return it->second.get();
}

int RequestTable::InFlightOf(const std::string& caller) const {
  auto it = per_caller_.find(caller);
  return it == per_caller_.end() ? 0 : it->second;
}

void RequestTable::SetQueued(InFlightRequest& r, bool queued) {
  if (r.queued == queued) return;
  r.queued = queued;
  if (r.wants_audio) running_audio_ += queued ? -1 : 1;
}

void RequestTable::Forget(const InFlightRequest& request) {
  auto it = per_caller_.find(request.caller);
  if (it != per_caller_.end() && --it->second == 0) per_caller_.erase(it);
  if (request.wants_audio && !request.queued) --running_audio_;
  scheduler_->Cancel(request.idle_timer);
  scheduler_->Cancel(request.queue_timer);
  if (request.input != nullptr) scheduler_->Cancel(request.input->idle_timer);
}

void RequestTable::Finish(const std::string& id, v1::Terminal terminal) {
  auto it = requests_.find(id);
  if (!OMNISTAGE_INVARIANT_HOLDS(it != requests_.end(), (LogContext{id, -1, -1, ""}),
                                 "a second terminal for a request that already ended")) {
    return;  // The first one was its end.
  }
  std::unique_ptr<InFlightRequest> ended = std::move(it->second);
  requests_.erase(it);
  Forget(*ended);
  ended->sink->Finish(ended->id, std::move(terminal));
}

void RequestTable::Remove(const std::string& id) {
  auto it = requests_.find(id);
  if (it == requests_.end()) return;
  Forget(*it->second);
  requests_.erase(it);
}

std::vector<std::string> RequestTable::Ids() const {
  std::vector<std::string> ids;
  ids.reserve(requests_.size());
  for (const auto& [id, request] : requests_) ids.push_back(id);
  return ids;
}

void RequestTable::ForEach(const std::function<void(const InFlightRequest&)>& visit) const {
  for (const auto& [id, request] : requests_) visit(*request);
}

}  // namespace omnistage
