// SessionRecorder: the client end of one worker session in the worker fuzz
// target. It is the session's EventTransport (writes complete at once, or when
// the target says, as a slow reader's would), it hears of every command the
// target sends on the session, and it checks the event stream as it comes:
//   - Ready first, once, naming the session's id; nothing after the stream's
//     end, which comes once, with no write in flight;
//   - a step output only for a request added on this session and not yet
//     ended, and at most one finished output per Add;
//   - a rejection only for a command sent, of that command's kind and id;
//   - a utility result only for a call made, once.
// After the target has settled the session, Check() counts: every Add that
// was not rejected ended exactly once (at most once when the session could
// not be settled, e.g. after a fatal engine error), commands that must be
// refused were, commands that must be taken were, every utility call was
// answered.
//
// Thread-safe: the busy loop writes step outputs while the target sends
// commands.
#ifndef OMNISTAGE_FUZZ_SESSION_RECORDER_H_
#define OMNISTAGE_FUZZ_SESSION_RECORDER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "protos/stage_worker.pb.h"
#include "stage_worker/connect_session.h"

namespace omnistage {
namespace fuzz {

// What a command must meet, as far as the sender can tell in advance.
enum class Expect { kEither, kTaken, kRefused };

class SessionRecorder : public EventTransport {
 public:
  // `inline_writes`: complete each write at once (a fast reader); else writes
  // wait for CompleteWrite().
  // With `trace`, every event is printed as it is written.
  SessionRecorder(std::string label, bool inline_writes, bool trace = false)
      : label_(std::move(label)), inline_writes_(inline_writes), trace_(trace) {}

  const std::string& label() const { return label_; }

  // The session writing here; set before it starts.
  void Attach(std::shared_ptr<ConnectSession> session);

  // Call before handing `command` to the worker.
  void Sent(const v1::WorkerCommand& command, Expect expect);

  // EventTransport.
  void BeginWrite(const v1::WorkerEvent* event) override;
  void FinishStream(const absl::Status& status) override;
  void CancelStream() override {}

  // Completes the write in flight, if any; false when none was.
  bool CompleteWrite();
  bool stream_ended() const;
  bool fatal_seen() const;
  // The ids of every Add sent, in order (with repeats).
  std::vector<std::string> added_ids() const;
  // The value utility call `call_id` returned, once it came (completing slow
  // writes meanwhile); nullopt if it did not within `timeout`, failed, or the
  // stream ended first.
  std::optional<google::protobuf::Value> AwaitUtility(uint64_t call_id, absl::Duration timeout);

  // See above; `settled`: the session was open and every request on it was
  // stopped before the check.
  void Check(bool settled) const;

 private:
  struct SentCommand {
    v1::WorkerCommand::CommandCase kind;
    std::string request_id;
    uint64_t call_id = 0;
    Expect expect = Expect::kEither;
  };

  void OnStep(const v1::StepOutputs& step) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void OnRejected(const v1::CommandRejected& rejected) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string label_;
  const bool inline_writes_;
  const bool trace_;
  std::shared_ptr<ConnectSession> session_;

  mutable absl::Mutex mu_;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  int ready_ ABSL_GUARDED_BY(mu_) = 0;
  int ends_ ABSL_GUARDED_BY(mu_) = 0;
  bool fatal_ ABSL_GUARDED_BY(mu_) = false;
  // seq -> the commands sent with it (a stale seq may repeat).
  std::multimap<uint64_t, SentCommand> sent_ ABSL_GUARDED_BY(mu_);
  std::map<uint64_t, int> rejections_ ABSL_GUARDED_BY(mu_);
  // Per request id: Adds sent, and finished outputs seen.
  std::map<std::string, int> adds_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, int> ended_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> added_order_ ABSL_GUARDED_BY(mu_);
  // Utility call id -> results seen, and the values returned.
  std::map<uint64_t, int> utility_results_ ABSL_GUARDED_BY(mu_);
  std::map<uint64_t, google::protobuf::Value> utility_values_ ABSL_GUARDED_BY(mu_);
};

}  // namespace fuzz
}  // namespace omnistage

#endif  // OMNISTAGE_FUZZ_SESSION_RECORDER_H_
