// SphinxModel: the listener's speech recognizer, pocketsphinx (Debian's
// 0.8+5prealpha, sphinxbase API) with the en-us model of pocketsphinx-en-us,
// loaded once per engine, and the decoders its requests run on.
//
//   absl::StatusOr<std::shared_ptr<SphinxModel>> model = SphinxModel::Load(options);
//   std::shared_ptr<SphinxDecoder> decoder = (*model)->Acquire();  // null: all in use
//   decoder->Start();                       // a new request
//   std::vector<HeardUtterance> heard;
//   decoder->Feed(samples_16k, &heard);     // an utterance that ended, timed
//   decoder->EndUtterance(false, &heard);   // the rest, at the end of the audio
//
// A pocketsphinx decoder holds its own acoustic model, dictionary and search
// (about 60 MB, and most of a second to create); the language model (the
// largest part, about 34 MB) is read once and shared by every decoder. A
// decoder runs one request at a time, so the model holds as many as the
// engine runs requests at once, created up front (no request waits seconds
// for one in the middle of a step).
//
// A decoder's only state that outlives an utterance is its estimate of the
// cepstral mean (the channel's colour, which pocketsphinx adapts at each
// utterance's end). Start() sets it back to its initial value, so a request's
// transcript does not depend on the requests that ran on the decoder before:
// every request starts from the same decoder state. That initial value is the
// model's (its feat.params) unless SphinxOptions::cmn_init sets one measured
// on the audio the stage will hear; it matters (docs/engines.md, "listener").
//
// Words come with their times in the request's audio: pocketsphinx's own
// word segmentation (frames of 10 ms), placed on the audio's time line. Its
// frame numbers run on over the decoder's whole life, so the decoder places
// each utterance by where its voice activity detector heard speech start
// (less the frames it keeps before that) and its words from there.
//
// Not thread-safe: the listener calls it from the busy loop only.
#ifndef OMNISTAGE_STAGE_WORKER_ENGINES_SPEECH_SPHINX_DECODER_H_
#define OMNISTAGE_STAGE_WORKER_ENGINES_SPEECH_SPHINX_DECODER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

// pocketsphinx's and sphinxbase's types, kept out of the header.
struct ps_decoder_s;
struct ngram_model_s;

namespace omnistage {

// The rate pocketsphinx's en-us model takes.
inline constexpr int kSphinxSampleRateHz = 16000;

// A word heard, and when: milliseconds from the start of the request's audio.
struct HeardWord {
  std::string word;
  int64_t start_ms = 0;
  int64_t end_ms = 0;
};

// The words of one utterance (none: it held no words).
using HeardUtterance = std::vector<HeardWord>;

struct SphinxOptions {
  std::string acoustic_model;  // a folder (mdef, means, ...)
  std::string language_model;  // an ARPA or binary n-gram file
  std::string dictionary;      // a pronunciation dictionary
  // Each request's initial cepstral mean; empty: the model's.
  std::vector<float> cmn_init;
  int decoders = 1;
};

class SphinxDecoder {
 public:
  ~SphinxDecoder();
  SphinxDecoder(const SphinxDecoder&) = delete;
  SphinxDecoder& operator=(const SphinxDecoder&) = delete;

  // Starts a request: the initial cepstral mean, a new utterance.
  absl::Status Start();

  // Decodes the next 16 kHz mono samples. When an utterance ended in them
  // (speech, then enough silence), appends it to `heard` (an utterance with
  // words only) and starts the next.
  absl::Status Feed(absl::Span<const int16_t> samples, std::vector<HeardUtterance>* heard);

  // Ends the current utterance (the audio ended, or text comes between):
  // appends it to `heard` when it held words, and starts the next one when
  // `more`.
  absl::Status EndUtterance(bool more, std::vector<HeardUtterance>* heard);

 private:
  friend class SphinxModel;
  SphinxDecoder(ps_decoder_s* decoder, const std::vector<float>* cmn_init);
  absl::Status StartUtterance();
  // The words of the utterance just ended, timed.
  HeardUtterance TimedWords();
  // Back to the pool: ends an utterance left running (an aborted request).
  void Release();

  ps_decoder_s* const decoder_;
  const std::vector<float>* const cmn_init_;  // the model's
  // The front end's frame shift, and the frames it keeps before speech.
  int frame_samples_ = 160;
  int prespeech_frames_ = 20;
  bool in_utterance_ = false;
  bool heard_speech_ = false;  // in the current utterance
  bool in_speech_ = false;     // as the detector said after the last frame fed
  int64_t samples_fed_ = 0;    // since Start()
  int64_t utterance_start_ = 0;
  // Where the current utterance's first kept frame starts; -1: no speech yet.
  int64_t speech_start_ = -1;
};

class SphinxModel : public std::enable_shared_from_this<SphinxModel> {
 public:
  // Loads the model and creates `options.decoders` decoders.
  // FAILED_PRECONDITION naming the file and the Debian package when a model
  // file is missing or pocketsphinx cannot load it; INVALID_ARGUMENT for a
  // cmn_init of the wrong length.
  static absl::StatusOr<std::shared_ptr<SphinxModel>> Load(const SphinxOptions& options);
  ~SphinxModel();
  SphinxModel(const SphinxModel&) = delete;
  SphinxModel& operator=(const SphinxModel&) = delete;

  // A decoder not in use, back in the pool when the last copy is dropped
  // (which also keeps the model alive); null when every decoder is in use.
  std::shared_ptr<SphinxDecoder> Acquire();

  int decoders() const { return static_cast<int>(all_.size()); }

 private:
  SphinxModel() = default;

  ngram_model_s* language_model_ = nullptr;  // shared by the decoders
  std::vector<float> cmn_init_;
  std::vector<std::unique_ptr<SphinxDecoder>> all_;
  std::vector<SphinxDecoder*> free_;
};

}  // namespace omnistage

#endif  // OMNISTAGE_STAGE_WORKER_ENGINES_SPEECH_SPHINX_DECODER_H_
