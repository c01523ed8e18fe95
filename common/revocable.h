// Revocable<T>: a pointer that other threads use until its owner takes it back.
//
// Made for callbacks that can outlive the object they call, e.g. gRPC reactors
// and the object they forward stream events to: the reactors hold a
// shared_ptr<Revocable<T>>, the object revokes it first thing in its
// destructor, and from then on the reactors see that it is gone (and end their
// streams themselves) instead of calling freed memory.
//
//   auto ref = std::make_shared<Revocable<Worker>>(&worker);
//   // Any thread:
//   if (!ref->With([&](Worker& w) { w.HandleCommand(...); })) { /* gone */ }
//   // The owner, before the Worker's members go:
//   ref->Revoke();
//
// Thread-safe. With() calls may nest. Revoke() waits for the With() calls
// running on other threads, so it must not be called from inside one (it
// would wait for itself), and what runs inside With() must not wait for the
// thread that revokes.
#ifndef OMNISTAGE_COMMON_REVOCABLE_H_
#define OMNISTAGE_COMMON_REVOCABLE_H_

#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace omnistage {

template <typename T>
class Revocable {
 public:
  explicit Revocable(T* target) : target_(target) {}
  Revocable(const Revocable&) = delete;
  Revocable& operator=(const Revocable&) = delete;

  // Runs `fn(target)` and returns true; once Revoke() has begun, runs nothing
  // and returns false.
  template <typename Fn>
  bool With(Fn&& fn) {
    T* target;
    {
      absl::MutexLock lock(&mu_);
      if (target_ == nullptr) return false;
      target = target_;
      ++users_;
    }
    std::forward<Fn>(fn)(*target);
    absl::MutexLock lock(&mu_);
    --users_;
    return true;
  }

  // From now on With() runs nothing; returns once the calls that were running
  // have returned. Idempotent.
  void Revoke() {
    absl::MutexLock lock(&mu_);
    target_ = nullptr;
    auto unused = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return users_ == 0; };
    mu_.Await(absl::Condition(&unused));
  }

  bool revoked() const {
    absl::MutexLock lock(&mu_);
    return target_ == nullptr;
  }

 private:
  mutable absl::Mutex mu_;
  T* target_ ABSL_GUARDED_BY(mu_);
  // With() calls between their check and their return.
  int users_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace omnistage

#endif  // OMNISTAGE_COMMON_REVOCABLE_H_
