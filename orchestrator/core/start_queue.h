// StartQueue: admitted requests that wait for a free slot on stage 0
// (docs/architecture.md, "The admission queue").
//
// A new request waits here while stage 0 has no free slot (but a live
// replica: with none it fails at once), and leaves in the order
// admission_queue.h gives (priority, then fair share between identities, then
// arrival). A queued request has started (its client has its id): it can be
// aborted or cancelled, ending at once with its terminal ABORT (no worker holds
// anything of it); a wait past limits.max_queue_ms, a shed for a higher
// priority and a drain end it with an error terminal that says why and when to
// retry.
//
// Not thread-safe: runs on the core's loop.
#ifndef OMNISTAGE_ORCHESTRATOR_CORE_START_QUEUE_H_
#define OMNISTAGE_ORCHESTRATOR_CORE_START_QUEUE_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/liveness.h"
#include "orchestrator/core/admission_queue.h"
#include "orchestrator/core/core_parts.h"
#include "orchestrator/core/request_table.h"
#include "protos/common.pb.h"

namespace omnistage {

class StartQueue {
 public:
  // What the queue asks of the core.
  struct Hooks {
    // Starts `r`, just out of the queue, on stage 0 with its queued prompt;
    // the error when it could not (the queue then fails it).
    std::function<std::optional<v1::Error>(InFlightRequest& r)> start;
    FailRequestsFn fail;
    // Whether `r` (just admitted), or with null the queue's next, must wait
    // for audio capacity (audio_streams.h).
    std::function<bool(const InFlightRequest* r)> audio_waits;
  };

  StartQueue(CoreParts core, Hooks hooks);
  StartQueue(const StartQueue&) = delete;
  StartQueue& operator=(const StartQueue&) = delete;

  // Whether `r`, just admitted, waits: the queue is on, and others wait,
  // stage 0 has no free slot (but a live replica), or it wants audio and the
  // pipeline holds all the audio streams admission allows.
  bool MustWait(const InFlightRequest& r) const;
  // Queues `r` with its prompt and tells its client it started; may shed a
  // queued request of a lower priority. RESOURCE_EXHAUSTED (with a retry
  // hint) when the queue is full: the call fails, and nothing started.
  absl::Status Add(InFlightRequest& r, std::string prompt, int priority, int weight);
  // Starts queued requests while stage 0 has free slots and audio capacity
  // allows (while it does not, nothing leaves, whatever the next one wants);
  // one being aborted is taken out without being started (parked) until
  // Requeue.
  void Pump();
  // While held (a batch of worker outputs is handled: a request sent now could
  // take an id whose older outputs are still below), nothing leaves; Release
  // pumps.
  void Hold() { held_ = true; }
  void Release();
  // A parked request whose abort did not end it goes back into the queue,
  // behind its identity's others at its priority.
  void Requeue(InFlightRequest& r);
  // `id` ended: it waits no more.
  void Remove(const std::string& id) { queue_.Remove(id); }
  // Ends every queued request with `error` (a drain).
  void RefuseAll(const v1::Error& error);
  // The waiting requests, in the order they leave.
  const AdmissionQueue& order() const { return queue_; }

 private:
  void OnTimer(const std::string& id);

  const CoreParts core_;
  const Hooks hooks_;
  AdmissionQueue queue_;
  // A start that fails ends its request, which may pump again: the loop
  // running goes on instead.
  bool pumping_ = false;
  bool held_ = false;
  Liveness alive_;
};

}  // namespace omnistage

#endif  // OMNISTAGE_ORCHESTRATOR_CORE_START_QUEUE_H_
