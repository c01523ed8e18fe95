// CoreChecker: the invariants of the orchestrator's request lifecycle
// (orchestrator/core/pipeline_core.h, docs/architecture.md), checked from outside the
// core while a fuzz target drives it through a CoreFixture.
//
// Every Generate call gets a CheckingSink from NewSink() (no output after a
// terminal, one ending per call, ...); every client Abort gets its callback
// from NewAbort(). After each operation the target calls CheckStep():
//   - the core's in-flight count is the number of admitted calls not ended;
//   - every binding in every StagePool is on an alive replica and belongs to
//     an in-flight request, or to an ended one whose clean-up has named it in
//     a worker Abort call to that very replica since it ended (the documented
//     exception: AbortCoordinator::CleanUp);
//   - conversely, an in-flight request that a worker still runs (as far as
//     the fakes' calls, the outputs and the replica's life tell) is bound to
//     that worker's replica: the orchestrator never loses track of work;
//   - a client Abort makes at most one worker Abort call per replica per
//     stage, naming only its own ids, and none after it answered;
// and, as it happens:
//   - a request ending with an ABORT terminal has no binding left (two-phase
//     abort: it commits only after every stage confirmed the stop);
//   - an Abort answers once, one result per id in order; another identity's
//     request is NOT_FOUND, whatever its state; ABORTED means that
//     request ended with ABORT, a request still in flight is FAILED.
// Once the target has settled everything, CheckSettled(): every call ended
// exactly once, every Abort answered, nothing in flight, no binding left.
//
// A client Abort's worker calls are recognised by their deadline: the target
// gives each client Abort a deadline of its own (not a whole millisecond, while
// the core's own aborts get whole ones, as the clock moves in milliseconds).
#ifndef OMNISTAGE_FUZZ_CORE_CHECKER_H_
#define OMNISTAGE_FUZZ_CORE_CHECKER_H_

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "fuzz/checking_sink.h"
#include "fuzz/core_fixture.h"
#include "protos/orchestrator.pb.h"

namespace omnistage {
namespace fuzz {

class CoreChecker {
 public:
  explicit CoreChecker(CoreFixture* fixture);

  // A sink for a Generate asking for `asked_id` ("" for a generated one).
  std::shared_ptr<CheckingSink> NewSink(const std::string& asked_id);
  // The callback for a client Abort of `request` whose worker calls carry
  // `worker_deadline` (unique to it).
  // `caller`: the identity asking; another identity's requests must be
  // reported NOT_FOUND and left alone.
  std::function<void(absl::StatusOr<v1::AbortResponse>)> NewAbort(const v1::AbortRequest& request,
                                                                   absl::Time worker_deadline,
                                                                   const std::string& caller = "");

  // Every id a request was asked or admitted under, in order of first use.
  const std::vector<std::string>& ids() const { return id_list_; }
  // The sinks of all Generate calls, in order.
  const std::vector<std::shared_ptr<CheckingSink>>& sinks() const { return sinks_; }
  // The sink of the in-flight request `id`, or null.
  std::shared_ptr<CheckingSink> InFlight(const std::string& id) const;

  // What the target tells of the workers: the replica sent `id`'s last
  // output; the oldest waiting Abort call of the replica is about to be
  // answered with `status`; the replica refused `id`'s Add.
  void WorkerFinished(int stage, int replica, const std::string& id);
  void WorkerAbortAnswered(int stage, int replica, const absl::Status& status);
  void WorkerRefusedAdd(int stage, int replica, const std::string& id);

  void CheckStep();
  void CheckSettled();

 private:
  struct ClientAbort {
    std::vector<std::string> ids;
    absl::Time worker_deadline;
    std::string caller;
    // The sinks of the requested ids in flight when it was called.
    std::map<std::string, std::shared_ptr<CheckingSink>> in_flight;
    int answers = 0;
    // "<stage>.<replica>" -> worker calls made for it.
    std::map<std::string, int> calls;
  };

  void NoteId(const std::string& id);
  void OnFinish(const std::string& id, const v1::Terminal& terminal);
  void OnAbortAnswer(ClientAbort& abort, const absl::StatusOr<v1::AbortResponse>& result);
  // Reads the worker Abort calls made since the last scan from the fakes' log.
  void ScanWorkerCalls();
  void CheckBindings();
  // Forgets what the workers of replicas that went down (or came back as a new
  // incarnation) ran: their sessions broke, which stops it worker-side.
  void ForgetLostWork();

  CoreFixture* const fixture_;
  std::vector<std::shared_ptr<CheckingSink>> sinks_;
  std::set<std::string> id_set_;
  std::vector<std::string> id_list_;
  std::vector<std::unique_ptr<ClientAbort>> aborts_;
  // Log lines read so far, and abort calls read so far per "<stage>.<replica>".
  size_t scanned_ = 0;
  std::map<std::string, size_t> calls_read_;
  // (stage, replica, id) -> the log index of the last worker Abort call naming it.
  std::map<std::tuple<int, int, std::string>, size_t> last_named_;
  // id -> the log size when its last request ended.
  std::map<std::string, size_t> ended_at_;
  // (stage, replica, id): the worker was sent the in-flight request `id` and
  // has not ended it.
  std::set<std::tuple<int, int, std::string>> running_;
  // "<stage>.<replica>" -> its instance id when last seen alive, and how many
  // times its worker's work was lost (its sessions broke).
  std::map<std::string, std::string> instances_;
  std::map<std::string, int> epochs_;
  // ("<stage>.<replica>", call index) -> the epoch of the replica when the
  // Abort call was made: an answer stops only work of that epoch.
  std::map<std::pair<std::string, size_t>, int> call_epochs_;
};

}  // namespace fuzz
}  // namespace omnistage

#endif  // OMNISTAGE_FUZZ_CORE_CHECKER_H_
