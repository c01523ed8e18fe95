// StreamResampler: converts a stream of 16-bit mono samples from one rate to
// another as it arrives, piece by piece, for the listener (any input rate to
// the recognizer's 16 kHz).
//
//   StreamResampler resampler(44100, 16000);
//   std::vector<int16_t> out;
//   resampler.Push(first_piece, &out);   // what the input so far determines
//   resampler.Push(second_piece, &out);
//   resampler.Flush(&out);               // the end of the stream
//
// Unlike pcm.h's Resample() (linear interpolation, for raising the rate), this
// filters: lowering the rate without a low-pass filter folds everything above
// the new Nyquist frequency back into the band the recognizer listens to. Each
// output sample is a windowed-sinc (Blackman) interpolation of the input
// around its position, the filter's cut-off at the lower of the two Nyquist
// frequencies (a little below, leaving room for the window's transition band).
//
// The output depends only on the whole input, not on how it was cut into
// pieces: output sample j lies at input position j * from_hz / to_hz, computed
// in integers, and is produced once every input sample its filter reaches has
// arrived (the input before the start and after the end reads as silence).
// There are floor(n * to_hz / from_hz) output samples for n input samples, as
// pcm.h's ResampledCount() counts them. Equal rates copy the input unchanged.
//
// Not thread-safe (one stream, one owner).
#ifndef OMNISTAGE_STAGE_WORKER_ENGINES_SPEECH_RESAMPLER_H_
#define OMNISTAGE_STAGE_WORKER_ENGINES_SPEECH_RESAMPLER_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"

namespace omnistage {

class StreamResampler {
 public:
  // Rates in Hz, both positive.
  StreamResampler(int from_hz, int to_hz);

  int from_hz() const { return from_hz_; }
  int to_hz() const { return to_hz_; }

  // Takes the next input samples; appends to `out` the output samples they
  // complete.
  void Push(absl::Span<const int16_t> samples, std::vector<int16_t>* out);

  // The input has ended: appends the remaining output samples. Push() must not
  // be called after it.
  void Flush(std::vector<int16_t>* out);

 private:
  // Appends output samples while the input they need is there (all of it when
  // `at_end`).
  void Produce(bool at_end, std::vector<int16_t>* out);
  // The filter's weights for an output sample at input position
  // index + phase / to_hz_, for the inputs index - half_width_ + 1 ..
  // index + half_width_, normalized to sum to 1.
  void Weights(int64_t phase, double* weights) const;

  const int from_hz_;
  const int to_hz_;
  // The cut-off as a fraction of the input's Nyquist frequency.
  const double cutoff_;
  // Input samples on each side of an output sample's position that its
  // filter reaches.
  const int half_width_;
  // Weights per phase (the distinct values of j * from_hz % to_hz, multiples
  // of gcd(from_hz, to_hz)), 2 * half_width_ each, when there are few enough
  // phases to keep; empty otherwise (computed per sample).
  int64_t phase_step_ = 1;
  std::vector<double> table_;

  int64_t next_output_ = 0;   // index of the next output sample
  int64_t input_count_ = 0;   // input samples pushed so far
  int64_t history_start_ = 0;  // input index of history_[0]
  std::vector<int16_t> history_;  // the input from history_start_ on
};

}  // namespace omnistage

#endif  // OMNISTAGE_STAGE_WORKER_ENGINES_SPEECH_RESAMPLER_H_
