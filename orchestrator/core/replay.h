// What failover keeps of a request to resume it on another replica of a stage
// (docs/reliability.md, "Failover"), and how a replayed run is trimmed so that
// nothing is repeated.
//
// Content is counted per payload kind in the units a replay drops: bytes of
// text, token ids, bytes of audio, and raw payloads (opaque: counted whole, not
// compared). Text, tokens and audio are also fingerprinted, so a replay that
// does not reproduce what was delivered is caught instead of passed on.
//
//   ContentMark delivered;               // every payload the stage passed on
//   for (const v1::Payload& p : output.payloads()) delivered.Add(p);
//   ...the replica dies; the request runs again elsewhere...
//   ReplayFilter filter(delivered);
//   absl::Status same = filter.Trim(output.mutable_payloads());  // drops the replayed part
//
// Not thread-safe: owned by the orchestrator's event loop.
#ifndef OMNISTAGE_ORCHESTRATOR_CORE_REPLAY_H_
#define OMNISTAGE_ORCHESTRATOR_CORE_REPLAY_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/repeated_field.h"
#include "protos/common.pb.h"

namespace omnistage {

// How much content of each kind, and a fingerprint of it.
struct ContentMark {
  int64_t text_bytes = 0;
  int64_t token_ids = 0;
  int64_t audio_bytes = 0;
  int64_t raw_payloads = 0;
  uint64_t text_hash = kEmptyHash;
  uint64_t token_hash = kEmptyHash;
  uint64_t audio_hash = kEmptyHash;

  static constexpr uint64_t kEmptyHash = 0xcbf29ce484222325ULL;  // FNV-1a's basis

  // Counts the whole of `payload`.
  void Add(const v1::Payload& payload);
  bool empty() const {
    return text_bytes == 0 && token_ids == 0 && audio_bytes == 0 && raw_payloads == 0;
  }
};

// Drops from a replayed run exactly the content `delivered` counts, checking
// that it is the same content.
class ReplayFilter {
 public:
  explicit ReplayFilter(const ContentMark& delivered) : target_(delivered) {}

  // Removes from `payloads` (the replayed run's next output) what was already
  // delivered; the rest stays, in order. DATA_LOSS when the replayed content
  // differs from what was delivered.
  absl::Status Trim(google::protobuf::RepeatedPtrField<v1::Payload>* payloads);
  // Everything delivered has been replayed: the filter has nothing left to do.
  bool done() const;
  // At the replayed run's end: DATA_LOSS if it ended before reproducing all
  // that was delivered.
  absl::Status CheckEnded() const;

 private:
  // Drops up to what is left of the target from the front of `payload`;
  // true when nothing of it is left.
  bool TrimOne(v1::Payload* payload);
  absl::Status CheckKindsReached() const;

  const ContentMark target_;
  ContentMark seen_;
};

// Input and output kept per stage while failover is on for it: the whole input
// the stage received (stage 0: the prompt) and, for an engine that resumes by
// continuation, what it produced, one payload per kind.
struct StageReplay {
  // The input, each run of one kind joined into one payload.
  std::vector<v1::Payload> input;
  bool input_complete = false;
  ContentMark delivered;
  // For continuation: the text, the tokens and the audio produced so far, each
  // concatenated into one payload, and the raw payloads in order.
  std::optional<v1::Payload> produced_text;
  std::optional<v1::Payload> produced_tokens;
  std::optional<v1::Payload> produced_audio;
  std::vector<v1::Payload> produced_raw;
  // Every payload delivered so far came from a replica that resumes by
  // continuation, so the produced output above is all of it.
  bool produced_whole = true;
  // While a replayed run catches up with what was delivered.
  std::optional<ReplayFilter> replaying;
  // Failovers so far, and a replica loss seen while an abort held the request
  // (resumed only if that abort fails).
  int attempts = 0;
  bool lost_while_aborting = false;

  // Appends `payload` to the input, joined to the last kept payload when both
  // are text, tokens or audio of one format (engines see their input as one
  // run per kind, docs/engines.md): a stream of one-token chunks is kept as
  // one payload, not thousands. Returns the bytes kept.
  int64_t KeepInput(const v1::Payload& payload);
  // Appends `payload` to the produced output; returns the bytes kept.
  int64_t KeepProduced(const v1::Payload& payload);
  // The produced output as AddRequest.produced carries it.
  std::vector<v1::Payload> Produced() const;
  void Clear();
};

// Per request: its stages' replay state and what it costs in memory.
struct FailoverState {
  explicit FailoverState(size_t stages) : stages(stages) {}
  std::vector<StageReplay> stages;
  // Bytes kept (input and produced output, over all stages); past
  // limits.max_replay_bytes nothing more is kept and the request no longer
  // fails over.
  int64_t kept_bytes = 0;
  bool overflowed = false;
};

}  // namespace omnistage

#endif  // OMNISTAGE_ORCHESTRATOR_CORE_REPLAY_H_
