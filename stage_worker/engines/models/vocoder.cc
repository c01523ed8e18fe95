#include "stage_worker/engines/models/vocoder.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "stage_worker/engines/base/batching_engine.h"
#include "stage_worker/engines/base/engine_params.h"
#include "stage_worker/engines/models/vocoder_speech.h"
#include "stage_worker/engines/speech/espeak.h"
#include "stage_worker/engines/speech/pcm.h"

namespace omnistage {
namespace {

constexpr double kPi = 3.14159265358979323846;
// Peak level as a fraction of int16 full scale: loud enough to hear, far from
// clipping.
constexpr double kPeak = 0.3;
constexpr double kBaseHz = 220.0;               // A3
constexpr int kPentatonic[] = {0, 2, 4, 7, 9};  // major pentatonic, in semitones
constexpr int kOctaves = 3;
constexpr int kNotes = kOctaves * 5;
constexpr double kFadeMs = 5.0;

// `sound: tones`.
struct ToneOptions {
  int codes_per_step = 8;
  int ms_per_code = 40;
  int sample_rate_hz = 24000;
};

struct VocoderOptions {
  // `sound: speech` (the default): espeak-ng; null for `tones`.
  Espeak* espeak = nullptr;
  ToneOptions tones;  // sample_rate_hz applies to both
};

// Every note's samples as pcm_s16le bytes, index = note. Shared by all
// requests; constant after construction.
using NoteTable = std::vector<std::string>;

std::string RenderNote(int note, int samples, int sample_rate_hz) {
  const int semitones = 12 * (note / 5) + kPentatonic[note % 5];
  const double hz = kBaseHz * std::pow(2.0, semitones / 12.0);
  const int fade =
      std::max(1, std::min(samples / 4, static_cast<int>(sample_rate_hz * kFadeMs / 1000.0)));
  std::vector<int16_t> wave(static_cast<size_t>(samples));
  for (int i = 0; i < samples; ++i) {
    const int edge = std::min(i, samples - 1 - i);
    const double envelope = edge >= fade ? 1.0 : 0.5 - 0.5 * std::cos(kPi * edge / fade);
    const double phase = 2.0 * kPi * hz * i / sample_rate_hz;
    // A touch of the octave overtone makes it less sterile than a pure sine.
    const double mix = 0.85 * std::sin(phase) + 0.15 * std::sin(2.0 * phase);
    wave[i] = static_cast<int16_t>(std::lround(kPeak * 32767.0 * envelope * mix));
  }
  std::string pcm;
  AppendPcmS16le(wave, &pcm);
  return pcm;
}

std::shared_ptr<const NoteTable> RenderNotes(const ToneOptions& options) {
  const int samples =
      static_cast<int>(static_cast<int64_t>(options.sample_rate_hz) * options.ms_per_code / 1000);
  auto table = std::make_shared<NoteTable>();
  for (int note = 0; note < kNotes; ++note) {
    table->push_back(RenderNote(note, samples, options.sample_rate_hz));
  }
  return table;
}

class ToneVocoderRequest : public RequestGenerator {
 public:
  ToneVocoderRequest(const ToneOptions& options, std::shared_ptr<const NoteTable> notes,
                     const RequestSettings& settings)
      : options_(options), notes_(std::move(notes)), max_tokens_(settings.max_tokens) {}

  bool Ready(const RequestInput& input) const override {
    return consumed_ < input.tokens.size() || input.complete;
  }

  GeneratedStep Step(const RequestInput& input) override {
    const size_t end =
        std::min({input.tokens.size(), consumed_ + static_cast<size_t>(options_.codes_per_step),
                  static_cast<size_t>(max_tokens_)});
    GeneratedStep step;
    if (consumed_ < end) {
      v1::Payload& payload = step.payloads.emplace_back();
      v1::AudioChunk* audio = payload.mutable_audio();
      audio->set_sample_rate_hz(options_.sample_rate_hz);
      audio->set_channels(1);
      std::string* pcm = audio->mutable_pcm_s16le();
      pcm->reserve((end - consumed_) * (*notes_)[0].size());
      for (; consumed_ < end; ++consumed_) {
        const int note = ((input.tokens[consumed_] % kNotes) + kNotes) % kNotes;
        pcm->append((*notes_)[note]);
      }
    }
    if (consumed_ >= max_tokens_) {
      step.finish_reason = v1::FINISH_REASON_LENGTH;
    } else if (input.complete && consumed_ == input.tokens.size()) {
      step.finish_reason = v1::FINISH_REASON_STOP;
    }
    return step;
  }

 private:
  const ToneOptions options_;
  const std::shared_ptr<const NoteTable> notes_;
  const uint32_t max_tokens_;
  size_t consumed_ = 0;  // codes turned into audio
};

class VocoderEngine : public BatchingEngine {
 public:
  VocoderEngine(BatchingOptions batching, VocoderOptions options)
      : BatchingEngine(kVocoderEngineName, {v1::Payload::kTokens}, batching),
        options_(options),
        notes_(options.espeak == nullptr ? RenderNotes(options.tones) : nullptr) {}

  // Sounds codes as they arrive.
  StreamedInput streamed_input() const override { return StreamedInput::kIncremental; }

 protected:
  std::unique_ptr<RequestGenerator> NewGenerator(const RequestSettings& settings) const override {
    if (options_.espeak != nullptr) {
      // Validate() already accepted the extras, so reading them cannot fail.
      EngineParams extra(kVocoderEngineName, settings.extra, "extra parameter");
      return NewSpeechVocoderRequest(options_.espeak, options_.tones.sample_rate_hz,
                                     ReadSpeechVoice(&extra, *options_.espeak), settings);
    }
    return std::make_unique<ToneVocoderRequest>(options_.tones, notes_, settings);
  }

  // Speech takes a voice and a speed per request; tones take no extra
  // parameter.
  void ReadExtra(EngineParams* extra) const override {
    if (options_.espeak != nullptr) ReadSpeechVoice(extra, *options_.espeak);
  }

 private:
  const VocoderOptions options_;
  const std::shared_ptr<const NoteTable> notes_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Engine>> CreateVocoderEngine(
    const std::map<std::string, std::string>& params) {
  EngineParams reader(kVocoderEngineName, params);
  BatchingOptions batching = BatchingOptions::Read(&reader);
  VocoderOptions options;
  ToneOptions& tones = options.tones;
  const bool speech = reader.Enum("sound", "speech", {"speech", "tones"}) == "speech";
  tones.sample_rate_hz =
      static_cast<int>(reader.Int("sample_rate_hz", tones.sample_rate_hz, 8000, 192000));
  if (speech) {
    if (absl::Status status = reader.Finish(); !status.ok()) return status;
    absl::StatusOr<Espeak*> espeak = Espeak::Get();
    if (!espeak.ok()) return espeak.status();
    options.espeak = *espeak;
  } else {
    tones.codes_per_step =
        static_cast<int>(reader.Int("codes_per_step", tones.codes_per_step, 1, 1 << 20));
    // Bounded so the note table (15 notes) stays small.
    tones.ms_per_code = static_cast<int>(reader.Int("ms_per_code", tones.ms_per_code, 1, 1000));
  }
  absl::Status status = reader.Finish();
  if (!status.ok()) return status;
  return std::make_unique<VocoderEngine>(batching, options);
}

}  // namespace omnistage
