#include "gateway/batch/store_thread.h"

#include <utility>

namespace omnistage {

StoreThread::StoreThread(std::unique_ptr<SqliteDatabase> db) : db_(std::move(db)) {
  thread_ = std::thread([this] { Run(); });
}

StoreThread::~StoreThread() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
}

void StoreThread::Post(Task task) {
  absl::MutexLock lock(&mu_);
  tasks_.push_back(std::move(task));
}

size_t StoreThread::pending() const {
  absl::MutexLock lock(&mu_);
  return tasks_.size() + running_;
}

void StoreThread::Run() {
  for (;;) {
    Task task;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](StoreThread* self)
               ABSL_NO_THREAD_SAFETY_ANALYSIS { return self->stopping_ || !self->tasks_.empty(); },
          this));
      if (tasks_.empty()) return;  // Stopping, and nothing left.
      task = std::move(tasks_.front());
      tasks_.pop_front();
      running_ = 1;
    }
    task(*db_);
    absl::MutexLock lock(&mu_);
    running_ = 0;
  }
}

}  // namespace omnistage
