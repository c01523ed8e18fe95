// StoreThread: the one thread that uses the gateway's SQLite store, so that
// no request's bytes (an upload of 100 MB, a batch's output file) are
// written or read on the HTTP loop. Tasks run in the order posted; a task
// that has an answer for the loop posts it there itself.
//
//   StoreThread store(std::move(db));
//   store.Post([post, exchange](SqliteDatabase& db) {
//     absl::StatusOr<StoredFile> file = FileStore(&db).Create(...);
//     post([exchange, file] { ... reply on the loop ... });
//   });
//
// The destructor runs what was posted before it, then joins. Thread-safe.
#ifndef OMNISTAGE_GATEWAY_BATCH_STORE_THREAD_H_
#define OMNISTAGE_GATEWAY_BATCH_STORE_THREAD_H_

#include <deque>
#include <functional>
#include <memory>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "gateway/batch/sqlite_database.h"

namespace omnistage {

class StoreThread {
 public:
  using Task = std::function<void(SqliteDatabase&)>;

  explicit StoreThread(std::unique_ptr<SqliteDatabase> db);
  ~StoreThread();
  StoreThread(const StoreThread&) = delete;
  StoreThread& operator=(const StoreThread&) = delete;

  void Post(Task task) ABSL_LOCKS_EXCLUDED(mu_);
  // Tasks posted and not yet finished.
  size_t pending() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Run();

  const std::unique_ptr<SqliteDatabase> db_;
  mutable absl::Mutex mu_;
  std::deque<Task> tasks_ ABSL_GUARDED_BY(mu_);
  // The task running now counts as pending.
  size_t running_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace omnistage

#endif  // OMNISTAGE_GATEWAY_BATCH_STORE_THREAD_H_
