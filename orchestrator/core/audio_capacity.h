// AudioCapacity: how many audio streams the pipeline holds at real time, as
// measured from what its listeners get (docs/observability.md, "Audio
// capacity").
//
// Every sample says how many requests played audio through the whole interval
// since the one before (M) and how much audio they got together, and the load
// they were made under (N streams). A stream's wall seconds per second of
// audio, y = M x interval / audio, grows with N as the stages' steps grow with
// their batches; below 1 each stream is made faster than it plays.
// AudioCapacity fits y = a + b N by least squares, each sample weighted by its
// load and the older ones fading with time constant `window`, and the
// capacity is the N where the line crosses 1: (1 - a) / b. It is unknown
// until the samples span loads enough to show a slope (their spread at least
// one stream, and b > 0); samples that no longer
// do (a pipeline held at its capacity) keep the last capacity found.
//
//   AudioCapacity capacity(absl::Seconds(60));
//   capacity.Sample(/*load=*/14, /*streams=*/12, /*audio_seconds=*/30.5, absl::Seconds(1));
//   if (std::optional<double> n = capacity.Streams()) ...
//
// Not thread-safe: owned by the event loop.
#ifndef OMNISTAGE_ORCHESTRATOR_CORE_AUDIO_CAPACITY_H_
#define OMNISTAGE_ORCHESTRATOR_CORE_AUDIO_CAPACITY_H_

#include <optional>

#include "absl/time/time.h"

namespace omnistage {

class AudioCapacity {
 public:
  explicit AudioCapacity(absl::Duration window) : window_(window) {}

  // `streams` requests played audio through the last `interval` and got
  // `audio_seconds` of it together, under a load of `load` streams: every
  // one playing at the sample (those that began within the interval load the
  // stages as much as those that ended), per replica where the caller fits a
  // stage per replica. A sample of no load or no audio says nothing (older
  // samples fade all the same).
  void Sample(double load, int streams, double audio_seconds, absl::Duration interval);

  // The streams the pipeline holds with each made at least as fast as it
  // plays; nullopt while unknown.
  std::optional<double> Streams() const { return streams_; }
  // The last sample's wall seconds per second of audio per stream (0 before
  // any).
  double last_seconds_per_audio_second() const { return last_y_; }

 private:
  const absl::Duration window_;
  // Exponentially faded weighted sums of 1, N, y, N^2 and N y.
  double w_ = 0, wx_ = 0, wy_ = 0, wxx_ = 0, wxy_ = 0;
  double last_y_ = 0;
  std::optional<double> streams_;
};

}  // namespace omnistage

#endif  // OMNISTAGE_ORCHESTRATOR_CORE_AUDIO_CAPACITY_H_
