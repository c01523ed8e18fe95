// CheckingSink: a ResponseSink that crashes the fuzz target the moment the
// orchestrator breaks the Generate contract (orchestrator/core/response_sink.h):
//   - Started at most once, before any Send or Finish; Fail only before it;
//   - exactly one ending: one Finish (after Started) or one Fail, never both;
//   - no Send after the ending, and every Send and Finish under the admitted id;
//   - a Finish carries a reason; an ERROR one carries its error, only an ABORT
//     one carries partial output; a Fail carries an error status.
// It records what came, for the target's own checks, and runs `on_finish`
// (when set) inside Finish, where the target can check the state the
// orchestrator is in at the moment it ends the request.
//
// Not thread-safe: the fuzz targets drive the core on one thread.
#ifndef OMNISTAGE_FUZZ_CHECKING_SINK_H_
#define OMNISTAGE_FUZZ_CHECKING_SINK_H_

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "orchestrator/core/response_sink.h"
#include "protos/orchestrator.pb.h"

namespace omnistage {
namespace fuzz {

class CheckingSink : public ResponseSink {
 public:
  // `label` names this Generate call in failure messages.
  explicit CheckingSink(std::string label) : label_(std::move(label)) {}

  void Started(const std::string& request_id) override;
  void Send(const std::string& request_id, std::vector<v1::OutputChunk> chunks) override;
  void Finish(const std::string& request_id, v1::Terminal terminal) override;
  void Fail(const absl::Status& status) override;

  void set_on_finish(std::function<void(const std::string& id, const v1::Terminal&)> on_finish) {
    on_finish_ = std::move(on_finish);
  }

  const std::string& label() const { return label_; }
  // The identity that started the call ("" without authentication).
  void set_caller(std::string caller) { caller_ = std::move(caller); }
  const std::string& caller() const { return caller_; }
  bool started() const { return started_; }
  // Finished or failed.
  bool ended() const { return finished_ || failed_; }
  bool finished() const { return finished_; }
  bool failed() const { return failed_; }
  // The admitted id ("" before Started).
  const std::string& id() const { return id_; }
  const v1::Terminal& terminal() const { return terminal_; }
  const absl::Status& failure() const { return failure_; }
  const std::vector<v1::OutputChunk>& chunks() const { return chunks_; }

 private:
  const std::string label_;
  std::string caller_;
  std::function<void(const std::string&, const v1::Terminal&)> on_finish_;
  bool started_ = false;
  bool finished_ = false;
  bool failed_ = false;
  std::string id_;
  v1::Terminal terminal_;
  absl::Status failure_;
  std::vector<v1::OutputChunk> chunks_;
};

}  // namespace fuzz
}  // namespace omnistage

#endif  // OMNISTAGE_FUZZ_CHECKING_SINK_H_
