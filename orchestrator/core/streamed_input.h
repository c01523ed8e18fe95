// StreamedInput: a GenerateDuplex request's later messages feed stage 0 while
// its outputs stream back (docs/clients.md, "Streamed input").
//
// Input goes to stage 0 as AppendInput commands on the replica the request is
// bound to, so the worker sees it in order after the AddRequest; while the
// request waits in the admission queue it is held and goes with the
// AddRequest. Failover keeps it as it keeps any stage's streamed input. A
// request whose input is open does not go idle for want of output (stages may
// rightly wait for more input); its client's pauses are bounded by
// limits.input_idle_ms. Input that breaks the contract or the limits ends the
// request with INVALID_ARGUMENT (DEADLINE_EXCEEDED for a pause), naming the
// field (common/field_error.h), stopped on every stage.
//
// Not thread-safe: runs on the core's loop.
#ifndef OMNISTAGE_ORCHESTRATOR_CORE_STREAMED_INPUT_H_
#define OMNISTAGE_ORCHESTRATOR_CORE_STREAMED_INPUT_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/liveness.h"
#include "google/protobuf/repeated_field.h"
#include "orchestrator/core/core_parts.h"
#include "orchestrator/core/request_table.h"
#include "protos/orchestrator.pb.h"

namespace omnistage {

class StreamedInput {
 public:
  // What streamed input asks of the core.
  struct Hooks {
    // Sends `payloads` (`last`: the end of the input) to the replica of stage
    // 0 that runs `r`; the error when it refused them.
    std::function<std::optional<v1::Error>(
        InFlightRequest& r, const google::protobuf::RepeatedPtrField<v1::Payload>& payloads,
        bool last)>
        send;
    FailRequestsFn fail;
  };

  StreamedInput(CoreParts core, Hooks hooks);
  StreamedInput(const StreamedInput&) = delete;
  StreamedInput& operator=(const StreamedInput&) = delete;

  // OK when stage 0 takes input in pieces: none of its live replicas says its
  // engine does not (FAILED_PRECONDITION).
  absl::Status CheckStageZeroTakesIt() const;
  // `r` was admitted with streamed input: its input opens now.
  void Open(InFlightRequest& r);
  // The next message of `r`'s call (r has streamed input).
  void Append(InFlightRequest& r, v1::GenerateInput message);

 private:
  // Ends `r` for input that breaks the contract or the limits.
  void Refuse(InFlightRequest& r, const absl::Status& refusal);
  // Watches the pause since `r`'s last input message.
  void Arm(InFlightRequest& r);
  void OnIdle(const std::string& id);

  const CoreParts core_;
  const Hooks hooks_;
  Liveness alive_;
};

}  // namespace omnistage

#endif  // OMNISTAGE_ORCHESTRATOR_CORE_STREAMED_INPUT_H_
