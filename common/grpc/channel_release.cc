#include "common/grpc/channel_release.h"

#include <deque>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"

namespace omnistage {
namespace {

struct Held {
  std::shared_ptr<grpc::Channel> channel;
  absl::Time due;
};

struct Graveyard {
  absl::Mutex mu;
  std::deque<Held> held ABSL_GUARDED_BY(mu);
};

}  // namespace

void ReleaseChannelLater(std::shared_ptr<grpc::Channel> channel, absl::Duration grace) {
  // Never destroyed: what it holds at exit stays.
  static Graveyard* const graveyard = new Graveyard();
  const absl::Time now = absl::Now();
  std::deque<Held> due;
  {
    absl::MutexLock lock(&graveyard->mu);
    std::deque<Held>& held = graveyard->held;
    std::deque<Held> waiting;
    for (Held& h : held) (h.due <= now ? due : waiting).push_back(std::move(h));
    held = std::move(waiting);
    if (channel != nullptr) held.push_back({std::move(channel), now + grace});
  }
  // Destroyed outside the lock: a channel's destruction may take a while.
}

}  // namespace omnistage
