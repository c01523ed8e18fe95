// StageAudio: how many audio streams each stage holds at real time, measured
// from what it produces (docs/observability.md, "Audio capacity per stage"),
// for the stages' autoscaling signals.
//
// A stage's output is counted in its own units as it arrives (characters of
// text, token ids, seconds of audio, bytes of anything else; Units()). From
// every request that ends with its audio complete, each stage learns how much
// audio one unit of its output comes to (the requests' audio over their
// units). At every scaling sample, per stage, the requests that want audio
// and were producing there through the whole interval and the units they
// got, in audio, give the stage's wall seconds per second of audio per
// stream; an AudioCapacity per stage fits it against the streams per replica
// (all the requests producing there now over the replicas serving them), so
// a stage that gains or loses replicas keeps its fit. A stage's capacity is
// that per replica times its live replicas, never more than its slots.
//
// A stage fed by a slower one makes its output no faster than it is fed: its
// figure is at most the slower one's. The stage that limits the pipeline is
// therefore the first, in pipeline order, whose capacity is about the lowest
// (stage_demand.h decides it).
//
//   StageAudio stages(Parts());
//   r.stages[s].produced += StageAudio::Units(payload);  // as outputs arrive
//   stages.Ended(r, terminal);                           // as requests end
//   stages.Sample();                                     // every scaling sample
//   loads[s].audio = stages.Load(s);
//
// Not thread-safe: runs on the core's loop.
#ifndef OMNISTAGE_ORCHESTRATOR_CORE_STAGE_AUDIO_H_
#define OMNISTAGE_ORCHESTRATOR_CORE_STAGE_AUDIO_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/time/time.h"
#include "orchestrator/core/audio_capacity.h"
#include "orchestrator/core/core_parts.h"
#include "orchestrator/routing/stage_demand.h"
#include "protos/common.pb.h"

namespace omnistage {

class StageAudio {
 public:
  explicit StageAudio(CoreParts core);

  // How much output `payload` is, in its kind's units.
  static double Units(const v1::Payload& payload);

  // `r` ends with `terminal`: a request that completed with audio teaches
  // each stage its audio per unit of output.
  void Ended(const InFlightRequest& r, const v1::Terminal& terminal);
  // Measures each stage's requests that produced since the last sample.
  void Sample();
  // Stage `stage`'s audio load as of the last sample.
  StageAudioLoad Load(int stage) const;

 private:
  struct Stage {
    explicit Stage(absl::Duration window) : capacity(window) {}
    AudioCapacity capacity;
    // Over the requests that completed with audio: their audio and this
    // stage's units of output for them.
    double audio_seconds = 0;
    double units = 0;
    // The requests producing here at the last sample: their units then.
    absl::flat_hash_map<std::string, double> produced;
    // Requests that want audio held here at the last sample.
    int requests = 0;
  };

  const CoreParts core_;
  std::vector<Stage> stages_;
  absl::Time last_sample_;
  // Requests that want audio, in flight and in the admission queue, at the
  // last sample.
  int running_ = 0;
  int queued_ = 0;
};

}  // namespace omnistage

#endif  // OMNISTAGE_ORCHESTRATOR_CORE_STAGE_AUDIO_H_
