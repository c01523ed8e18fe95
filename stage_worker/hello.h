// A session's opening on a stage worker (docs/stage_worker.md, "The protocol,
// in short"): what the worker checks of a client's Hello, and the Ready that
// answers it.
#ifndef OMNISTAGE_STAGE_WORKER_HELLO_H_
#define OMNISTAGE_STAGE_WORKER_HELLO_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "protos/stage_worker.pb.h"
#include "stage_worker/engine_core.h"
#include "stage_worker/engines/base/engine.h"

namespace omnistage {

// The protocol version this worker speaks (Hello.protocol_version may not be
// newer).
inline constexpr uint32_t kWorkerProtocolVersion = 1;

// OK when a worker of stage `stage_id` over `engine` can open a session for
// `hello`; FAILED_PRECONDITION for a newer protocol or another stage,
// INVALID_ARGUMENT for stage defaults the engine refuses (the field path
// "defaults....").
absl::Status CheckHello(const v1::Hello& hello, int stage_id, const Engine& engine);
// For an engine that validates in its loop: the message that checks `hello`'s
// stage defaults there and calls `done` with CheckHello's kind of refusal, or
// OK.
CoreMessage CheckDefaultsMessage(const v1::Hello& hello,
                                 std::function<void(const absl::Status&)> done);

// What Ready says of the worker, whatever the session.
struct ReadyFacts {
  int stage_id = 0;
  std::string instance_id;
  std::string engine_name;
  int64_t max_message_bytes = 0;
};
// The Ready of a session numbered `session_id` on a worker over `engine`,
// with `live_requests` live on the worker now.
v1::WorkerEvent ReadyEvent(const ReadyFacts& facts, const Engine& engine,
                           const std::string& session_id, int live_requests);

}  // namespace omnistage

#endif  // OMNISTAGE_STAGE_WORKER_HELLO_H_
