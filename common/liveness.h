// Liveness: tells a callback that may outlive its object (a timer, the answer
// to a call) whether that object still exists.
//
// The object keeps a Liveness as its last member, so it ends first; each
// callback captures a Watch and does nothing once the object is gone:
//
//   Liveness alive_;
//   ...
//   scheduler_->PostAfter(interval, [this, alive = alive_.Watch()] {
//     if (alive) Sample();
//   });
//
// A Watch does not keep the object alive, and it is no lock: it is checked on
// the thread that destroys the object (the object's event loop), so nothing
// can end the object between the check and the call.
#ifndef OMNISTAGE_COMMON_LIVENESS_H_
#define OMNISTAGE_COMMON_LIVENESS_H_

#include <memory>
#include <utility>

namespace omnistage {

class Liveness {
 public:
  // What a callback keeps: true while the object lives.
  class Watch {
   public:
    Watch() = default;  // Watches nothing: always false.
    explicit operator bool() const { return !token_.expired(); }

   private:
    friend class Liveness;
    explicit Watch(std::weak_ptr<const char> token) : token_(std::move(token)) {}
    std::weak_ptr<const char> token_;
  };

  Liveness() = default;
  Liveness(const Liveness&) = delete;
  Liveness& operator=(const Liveness&) = delete;

  Watch watch() const { return Watch(token_); }
  // Ends the object's life early (first thing in its destructor, before the
  // members its callbacks use are gone); every Watch reads false from then on.
  void End() { token_.reset(); }

 private:
  std::shared_ptr<const char> token_ = std::make_shared<const char>(0);
};

}  // namespace omnistage

#endif  // OMNISTAGE_COMMON_LIVENESS_H_
