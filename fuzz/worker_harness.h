// WorkerHarness: a stage Worker with its busy loop, as the worker fuzz target
// drives it: the sessions it opened (each writing to a SessionRecorder), the
// commands and worker Aborts it sent, and the end of it all.
//
//   WorkerHarness harness(std::move(engine), /*trace=*/false);
//   OpenedSession* s = harness.AddSession(...);     // after Worker::OpenSession
//   harness.Send(*s, command, Expect::kTaken);
//   harness.StartLoop();
//   harness.Settle();    // every request ends; checks that each ended once
//
// Settle(): every open session's requests get their last input, the engine is
// polled until idle (so whatever a request would still emit has been
// emitted), every open session's requests are aborted, and the sessions'
// accounts are checked (exactly once, or at most once if the loop stopped);
// then the worker shuts down, every stream must end once, and every Abort
// must have answered once, naming only ids it was asked for. Every wait is
// bounded: a lost answer fails rather than hangs.
//
// Called on one thread (the target's); the recorders take the loop's events.
#ifndef OMNISTAGE_FUZZ_WORKER_HARNESS_H_
#define OMNISTAGE_FUZZ_WORKER_HARNESS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "fuzz/session_recorder.h"
#include "protos/stage_worker.pb.h"
#include "stage_worker/engines/base/engine.h"
#include "stage_worker/worker.h"

namespace omnistage {
namespace fuzz {

// How long a wait for the worker may take before it counts as a hang.
inline constexpr absl::Duration kPatience = absl::Seconds(20);

// What one worker Abort call got.
struct AbortCall {
  std::vector<std::string> ids;
  absl::Notification done;
  absl::Mutex mu;
  int answers ABSL_GUARDED_BY(mu) = 0;
  absl::StatusOr<std::vector<std::string>> result ABSL_GUARDED_BY(mu);
};

struct OpenedSession {
  std::unique_ptr<SessionRecorder> recorder;
  std::shared_ptr<ConnectSession> session;
  std::string peer;
  uint64_t last_seq = 0;
  bool closed = false;
  // Ids of Adds that said more input comes, with no last chunk sent since.
  std::set<std::string> input_open;
};

class WorkerHarness {
 public:
  WorkerHarness(std::unique_ptr<Engine> engine, bool trace);

  Worker& worker() { return *worker_; }
  // Starts the busy loop, once.
  void StartLoop();
  // Sessions in the order opened.
  const std::vector<std::unique_ptr<OpenedSession>>& sessions() const { return sessions_; }
  // Keeps `session` (opened and started on worker()).
  OpenedSession* AddSession(std::unique_ptr<OpenedSession> session);
  // The seq of the next command on `s`: fresh (after the last), or, when
  // `stale`, one that does not increase. Fresh ones are even, so stale ones
  // never repeat a fresh one.
  static uint64_t NextSeq(OpenedSession& s, bool stale);
  // Sends `command` on `s`, telling its recorder what to expect of it.
  void Send(OpenedSession& s, v1::WorkerCommand& command, Expect expect);
  // The session's stream ended or broke: as the gRPC reactor does.
  void Close(OpenedSession& s);
  // Calls Worker::Abort as `peer`; the call is checked at Settle().
  std::shared_ptr<AbortCall> Abort(const v1::WorkerAbortRequest& request, const std::string& peer);
  uint64_t NextUtilityCallId() { return ++utility_calls_; }
  void Settle();
  // With `trace`, what the target does is printed as it runs.
  void Trace(const std::string& what) const;

 private:
  bool RunToIdle(const std::vector<OpenedSession*>& open);
  void FlushAll();

  const bool trace_;
  // Before the worker: its sessions write to these until it is gone.
  std::vector<std::unique_ptr<OpenedSession>> sessions_;
  std::vector<std::shared_ptr<AbortCall>> aborts_;
  std::unique_ptr<Worker> worker_;
  bool started_ = false;
  uint64_t utility_calls_ = 0;
};

// Waits for `call`'s answer; a bounded wait.
void Await(AbortCall& call);

}  // namespace fuzz
}  // namespace omnistage

#endif  // OMNISTAGE_FUZZ_WORKER_HARNESS_H_
