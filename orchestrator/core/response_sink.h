// ResponseSink: where one Generate call's responses go. Implemented by the gRPC
// reactor (with a write queue that coalesces chunks queued while a write is in
// flight) and by a recording fake in tests. Thread-safe.
#ifndef OMNISTAGE_ORCHESTRATOR_CORE_RESPONSE_SINK_H_
#define OMNISTAGE_ORCHESTRATOR_CORE_RESPONSE_SINK_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "protos/orchestrator.pb.h"

namespace omnistage {

class ResponseSink {
 public:
  virtual ~ResponseSink() = default;
  // The request was admitted under `request_id` (generated if the client gave
  // none). Called once, before anything else, on the event loop.
  virtual void Started(const std::string& request_id) {}
  // Output chunks of request `request_id`, in order.
  virtual void Send(const std::string& request_id, std::vector<v1::OutputChunk> chunks) = 0;
  // The last response: carries `terminal`; the call then ends with OK.
  virtual void Finish(const std::string& request_id, v1::Terminal terminal) = 0;
  // Ends the call with an error status instead (errors before the request started).
  virtual void Fail(const absl::Status& status) = 0;
};

}  // namespace omnistage

#endif  // OMNISTAGE_ORCHESTRATOR_CORE_RESPONSE_SINK_H_
