// EngineCore: the stage worker's busy loop, the only thread that touches the engine.
//
// Semantics (docs/architecture.md, Stage worker):
//   while not shutdown:
//     if the engine has no work: block on the input queue (no timeout, no polling)
//       and apply the message that arrives;
//     drain the queue without blocking, applying ADD / APPEND / ABORT / UTILITY /
//       WAKEUP in FIFO order;
//     if shutdown was requested: stop before stepping;
//     if the engine has work: Step() once and emit its outputs as one batch.
//   Then emit exactly one of OnShutdown() (after RequestShutdown()) or OnFatal()
//   (an error from Step(), Add() or AppendInput()). A Utility() error goes back to
//   that call only.
//
//   EngineCore core(engine.get(), &sink);
//   std::thread loop([&] { core.Run(); });
//   core.Submit(CoreMessage::Add(request));
//   core.RequestShutdown();   // any thread
//   loop.join();
#ifndef OMNISTAGE_STAGE_WORKER_ENGINE_CORE_H_
#define OMNISTAGE_STAGE_WORKER_ENGINE_CORE_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "stage_worker/engines/base/engine.h"

namespace omnistage {

// One message for the busy loop. Build with the named constructors.
struct CoreMessage {
  enum class Kind { kAdd, kAppendInput, kDeadlines, kAbort, kUtility, kCheck, kWakeup };

  // `taken` (optional) runs on the loop thread right after the engine took the
  // request (not if Add() failed). `rejected` (optional) runs there instead when
  // the engine's ValidateInLoop() refused it: the request never started.
  static CoreMessage Add(EngineRequest request, std::function<void()> taken = nullptr,
                         std::function<void(const absl::Status&)> rejected = nullptr);
  static CoreMessage AppendInput(std::string id, std::vector<v1::Payload> chunks, bool last);
  // Engine::SetPlaybackDeadline for each (id, runs_out).
  static CoreMessage Deadlines(std::vector<std::pair<std::string, absl::Time>> deadlines);
  // `done(true)` runs on the loop thread right after the engine applied the abort;
  // `done(false)` if the loop ended before it could.
  static CoreMessage Abort(std::vector<std::string> ids,
                           std::function<void(bool applied)> done = nullptr);
  static CoreMessage Utility(uint64_t call_id, std::string name, google::protobuf::ListValue args);
  // Runs the engine's ValidateInLoop() on `request` without adding it; `done`
  // gets the outcome on the loop thread (OK if the loop ended before).
  static CoreMessage Check(EngineRequest request, std::function<void(const absl::Status&)> done);
  static CoreMessage Wakeup();

  Kind kind = Kind::kWakeup;
  EngineRequest request;                                      // kAdd
  std::function<void()> add_taken;                            // kAdd
  std::function<void(const absl::Status&)> add_rejected;      // kAdd; kCheck's outcome
  std::string id;                                             // kAppendInput
  std::vector<v1::Payload> chunks;                            // kAppendInput
  bool last = false;                                          // kAppendInput
  std::vector<std::pair<std::string, absl::Time>> deadlines;  // kDeadlines
  std::vector<std::string> ids;                               // kAbort
  std::function<void(bool)> abort_done;                       // kAbort
  uint64_t call_id = 0;                                       // kUtility
  std::string name;                                           // kUtility
  google::protobuf::ListValue args;                           // kUtility
};

// Where the loop's results go. Called on the loop thread only; implementations must
// not call back into the EngineCore synchronously except Submit().
class CoreSink {
 public:
  virtual ~CoreSink() = default;
  // Around every engine step (`step` counts from 1), also one that fails: for
  // watching step times. Nothing by default.
  virtual void OnStepBegin(uint64_t step) {}
  virtual void OnStepEnd(uint64_t step) {}
  // For metrics, nothing by default: how long the loop just sat blocked on an
  // empty queue; a step that succeeded, how long it took, how many outputs it
  // made and what the engine holds after it; an abort the engine applied.
  virtual void OnIdle(absl::Duration blocked) {}
  virtual void OnStepped(absl::Duration took, size_t outputs, EngineLoad load) {}
  virtual void OnAbortApplied(size_t ids, EngineLoad load) {}
  // All outputs of one engine step (`step` counts from 1).
  virtual void OnStepOutputs(uint64_t step, std::vector<v1::RequestOutput> outputs) = 0;
  // The outcome of UTILITY `call_id`.
  virtual void OnUtilityResult(uint64_t call_id,
                               absl::StatusOr<google::protobuf::Value> result) = 0;
  // The loop stopped because RequestShutdown() was called. Last call.
  virtual void OnShutdown() = 0;
  // The engine failed; the loop stopped. Last call.
  virtual void OnFatal(const absl::Status& reason) = 0;
};

// An unbounded FIFO with one blocking consumer. Thread-safe.
class InputQueue {
 public:
  // Appends `message`; false (and `message` untouched) once the queue is closed.
  bool Push(CoreMessage& message);
  // Appends all of `messages` at once; false (all untouched) once closed.
  bool PushAll(std::vector<CoreMessage>& messages);
  // Blocks until a message is available and returns it. Must not be called on a
  // closed, empty queue.
  CoreMessage PopBlocking();
  // Moves every queued message, in order, to the back of `out`; never blocks.
  void DrainInto(std::deque<CoreMessage>* out);
  // Refuses further pushes and returns what was still queued.
  std::deque<CoreMessage> Close();
  size_t size() const;

 private:
  mutable absl::Mutex mu_;
  std::deque<CoreMessage> messages_ ABSL_GUARDED_BY(mu_);
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
};

class EngineCore {
 public:
  // `engine` and `sink` must outlive the EngineCore.
  EngineCore(Engine* engine, CoreSink* sink);
  EngineCore(const EngineCore&) = delete;
  EngineCore& operator=(const EngineCore&) = delete;

  // Runs the loop on the calling thread until shutdown or a fatal error. Call once.
  void Run();

  // Queues a message for the loop. Thread-safe. Returns false once the loop has
  // ended; an abort's done callback then runs at once with false, a check's
  // with OK, on this thread.
  bool Submit(CoreMessage message);
  // Queues `messages` at once: the loop sees all of them or none, in order.
  bool SubmitAll(std::vector<CoreMessage> messages);

  // Sets the shutdown flag and queues a WAKEUP so a blocked loop wakes at once.
  // Thread-safe and non-blocking. Not async-signal-safe (it takes a mutex): deliver
  // signals to a thread with sigwait() and call it from there.
  void RequestShutdown();

  // Steps taken so far. Thread-safe.
  uint64_t steps() const { return steps_.load(std::memory_order_relaxed); }
  // Messages waiting for the loop. Thread-safe.
  size_t queue_depth() const { return queue_.size(); }

 private:
  // The loop proper; returns the fatal error, or OK after a shutdown request.
  absl::Status Loop();
  absl::Status Apply(CoreMessage& message);
  // Answers messages the loop will never apply (after it ended).
  void Reject(CoreMessage& message);

  Engine* const engine_;
  CoreSink* const sink_;
  InputQueue queue_;
  std::atomic<bool> shutdown_{false};
  std::atomic<uint64_t> steps_{0};
};

}  // namespace omnistage

#endif  // OMNISTAGE_STAGE_WORKER_ENGINE_CORE_H_
