// Runs one request on an engine in the ways failover may run it, for the tests
// of the replay contract (Engine::resume_mode(), docs/engines.md#failover): a
// replay engine's output for a request must be the same whatever shares its
// batch, however its input was chunked, whenever streamed input arrived
// relative to the steps, on whichever engine instance.
//
//   Delivery streamed;
//   streamed.chunk = 3;
//   streamed.streamed = true;
//   Collected want = RunDelivered(fresh_engine, input, params, Delivery());
//   ExpectSameContent(want, RunDelivered(other_engine, input, params, streamed));
//
// The request's id is kReplayId; its output is compared per payload kind
// (text, token ids, audio bytes, each concatenated) with its finish reason.
// Raw payloads are not compared: failover only counts them.
#ifndef OMNISTAGE_STAGE_WORKER_ENGINES_TESTING_REPLAY_HARNESS_H_
#define OMNISTAGE_STAGE_WORKER_ENGINES_TESTING_REPLAY_HARNESS_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "stage_worker/engines/base/engine.h"
#include "stage_worker/engines/testing/engine_harness.h"

namespace omnistage {
namespace engine_testing {

inline constexpr char kReplayId[] = "replayed";

// A request's whole input: text or token ids.
struct ReplayInput {
  std::string text;
  std::vector<int32_t> tokens;
};

// How a request's input reaches the engine.
struct Delivery {
  // 0: one payload. Else payloads of `chunk` token ids, or of `chunk` bytes of
  // text (moved to the next character boundary, since a TextDelta is UTF-8 on
  // the wire; any other cut falls mid-word).
  size_t chunk = 0;
  // False: every payload in the Add, with input_complete. True: the Add has
  // the first payload and more to come, the others follow one AppendInput
  // each, the last with `last`.
  bool streamed = false;
  // Streamed: how many steps the engine makes (while it has work, as the busy
  // loop does) before each AppendInput, cycling through the list.
  std::vector<int> steps_between = {1};
  // Streamed: `last` comes alone, in an AppendInput without payloads, after
  // the steps its turn in steps_between gives.
  bool last_alone = false;
};

// `input` cut as `chunk` says.
std::vector<v1::Payload> Chunks(const ReplayInput& input, size_t chunk);

// Runs request kReplayId alone on `engine`, its input delivered as `delivery`
// says, until the engine has no work; what it produced.
Collected RunDelivered(Engine* engine, const ReplayInput& input,
                       const v1::StageParameters& params, const Delivery& delivery);

// Runs request kReplayId (its input whole, in the Add) on `engine` among
// `mates`, each with its own input and seed: the first added before it, the
// second right after it, the third after two steps; the first is aborted after
// three. What kReplayId produced.
Collected RunAmongMates(Engine* engine, const ReplayInput& input,
                        const v1::StageParameters& params, const std::vector<ReplayInput>& mates);

// Expects `got` to hold what `want` holds: the same text, token ids and audio
// bytes, and the same end.
void ExpectSameContent(const Collected& want, const Collected& got);

}  // namespace engine_testing
}  // namespace omnistage

#endif  // OMNISTAGE_STAGE_WORKER_ENGINES_TESTING_REPLAY_HARNESS_H_
