// AudioStreams: the requests whose clients get audio, how many of them the
// pipeline holds at real time (audio_capacity.h, measured at every scaling
// sample from what those clients got), and admission by it
// (docs/architecture.md, "The admission queue"): with
// playback.audio_admission_percent set and the capacity known, a request that
// wants audio waits in the admission queue while that share of the capacity
// is in flight, instead of slowing every stream past real time. At least one
// audio request may always run.
//
//   AudioStreams audio(Parts());
//   audio.Sample();                        // every scaling sample
//   if (r.wants_audio && audio.Full()) ...   // it waits
//
// Not thread-safe: runs on the core's loop.
#ifndef OMNISTAGE_ORCHESTRATOR_CORE_AUDIO_STREAMS_H_
#define OMNISTAGE_ORCHESTRATOR_CORE_AUDIO_STREAMS_H_

#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/time/time.h"
#include "orchestrator/core/audio_capacity.h"
#include "orchestrator/core/core_parts.h"
#include "protos/orchestrator.pb.h"

namespace omnistage {

class AudioStreams {
 public:
  explicit AudioStreams(CoreParts core);

  // Measures the requests that played audio since the last sample.
  void Sample();
  // Whether a request that wants audio must wait: admission by audio
  // capacity is on, the capacity is known, and the requests in flight (not
  // queued, not `arriving`) that want audio reach its limit.
  bool Full(const InFlightRequest* arriving = nullptr) const;
  // For GetPipelineStatus.
  v1::AudioCapacityStatus Status() const;

 private:
  // The audio requests allowed in flight at once now; 0: no limit.
  int Limit() const;

  const CoreParts core_;
  AudioCapacity capacity_;
  // The requests playing at the last sample: the audio each had got then.
  absl::flat_hash_map<std::string, double> heard_;
  absl::Time last_sample_;
  int playing_ = 0;
};

}  // namespace omnistage

#endif  // OMNISTAGE_ORCHESTRATOR_CORE_AUDIO_STREAMS_H_
