#include "common/testing/manual_scheduler.h"

#include <algorithm>

namespace omnistage {

Scheduler::TimerId ManualScheduler::PostAt(absl::Time when, std::function<void()> task) {
  const TimerId id = next_id_++;
  tasks_.emplace(std::make_pair(when, id), std::move(task));
  deadlines_.emplace(id, when);
  return id;
}

void ManualScheduler::Cancel(TimerId id) {
  auto it = deadlines_.find(id);
  if (it == deadlines_.end()) return;
  tasks_.erase(std::make_pair(it->second, id));
  deadlines_.erase(it);
}

int ManualScheduler::RunPending() {
  int ran = 0;
  while (!tasks_.empty() && tasks_.begin()->first.first <= now_) {
    auto it = tasks_.begin();
    std::function<void()> task = std::move(it->second);
    deadlines_.erase(it->first.second);
    tasks_.erase(it);
    task();
    ++ran;
  }
  return ran;
}

void ManualScheduler::AdvanceBy(absl::Duration delay) {
  const absl::Time until = now_ + delay;
  RunPending();
  while (!tasks_.empty() && tasks_.begin()->first.first <= until) {
    now_ = std::max(now_, tasks_.begin()->first.first);
    RunPending();
  }
  now_ = until;
  RunPending();
}

absl::Time ManualScheduler::next_deadline() const {
  return tasks_.empty() ? absl::InfiniteFuture() : tasks_.begin()->first.first;
}

}  // namespace omnistage
