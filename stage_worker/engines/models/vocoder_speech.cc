#include "stage_worker/engines/models/vocoder_speech.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "stage_worker/engines/speech/pcm.h"
#include "stage_worker/engines/speech/phoneme_codes.h"

namespace omnistage {
namespace {

class SpeechVocoderRequest : public RequestGenerator {
 public:
  SpeechVocoderRequest(Espeak* espeak, int sample_rate_hz, SpeechVoice voice,
                       const RequestSettings& settings)
      : espeak_(espeak),
        sample_rate_hz_(sample_rate_hz),
        voice_(std::move(voice)),
        words_per_minute_(voice_.speed == 1.0
                              ? 0
                              : static_cast<int>(Espeak::kDefaultWordsPerMinute * voice_.speed +
                                                 0.5)),
        max_tokens_(settings.max_tokens),
        chunk_samples_(static_cast<size_t>(std::max(1, sample_rate_hz * kChunkMs / 1000))) {}

  bool Ready(const RequestInput& input) const override {
    return next_sample_ < audio_.size() || ClauseEnd(input) > consumed_ || InputDone(input);
  }

  GeneratedStep Step(const RequestInput& input) override {
    GeneratedStep step;
    if (next_sample_ == audio_.size()) {
      audio_.clear();
      next_sample_ = 0;
      const size_t end = ClauseEnd(input);
      if (end > consumed_) {
        absl::Status status =
            SpeakClause(absl::MakeConstSpan(input.tokens).subspan(consumed_, end - consumed_));
        consumed_ = end;
        if (!status.ok()) {
          step.finish_reason = v1::FINISH_REASON_ERROR;
          step.error = status;
          return step;
        }
      }
    }
    const size_t count = std::min(audio_.size() - next_sample_, chunk_samples_);
    if (count > 0) {
      v1::AudioChunk* chunk = step.payloads.emplace_back().mutable_audio();
      chunk->set_sample_rate_hz(sample_rate_hz_);
      chunk->set_channels(1);
      AppendPcmS16le(absl::MakeConstSpan(audio_).subspan(next_sample_, count),
                     chunk->mutable_pcm_s16le());
      next_sample_ += count;
    }
    if (next_sample_ == audio_.size()) {
      if (consumed_ >= max_tokens_) {
        step.finish_reason = v1::FINISH_REASON_LENGTH;
      } else if (InputDone(input)) {
        step.finish_reason = v1::FINISH_REASON_STOP;
      }
    }
    return step;
  }

 private:
  // Where the next clause ends (an index into input.tokens); consumed_ when no
  // whole clause is there yet.
  size_t ClauseEnd(const RequestInput& input) const {
    const size_t limit = std::min(input.tokens.size(), static_cast<size_t>(max_tokens_));
    for (size_t i = consumed_; i < limit; ++i) {
      if (IsClauseEnd(input.tokens[i]) || i + 1 - consumed_ == kMaxClauseCodes) return i + 1;
    }
    return input.complete || limit == max_tokens_ ? limit : consumed_;
  }

  bool InputDone(const RequestInput& input) const {
    return consumed_ >= max_tokens_ || (input.complete && consumed_ == input.tokens.size());
  }

  // Appends the clause's audio (after the pause that precedes it) to audio_.
  absl::Status SpeakClause(absl::Span<const int32_t> codes) {
    const char punctuation = IsClauseEnd(codes.back()) ? ClauseEndPunctuation(codes.back()) : '.';
    const std::string phonemes = PhonemeText(codes);
    if (absl::StripAsciiWhitespace(phonemes).empty()) return absl::OkStatus();
    absl::StatusOr<std::vector<int16_t>> speech =
        espeak_->Speak(absl::StrCat("[[", phonemes, "]]", std::string(1, punctuation)),
                       voice_.variant, /*voice=*/"", words_per_minute_);
    if (!speech.ok()) return speech.status();
    if (previous_punctuation_ != '\0') {
      absl::StatusOr<int> pause = espeak_->PauseAfter(previous_punctuation_);
      if (!pause.ok()) return pause.status();
      audio_.resize(static_cast<size_t>(
          ResampledCount(static_cast<int>(*pause / voice_.speed), espeak_->sample_rate_hz(),
                         sample_rate_hz_)));
    }
    const std::vector<int16_t> resampled =
        Resample(*speech, espeak_->sample_rate_hz(), sample_rate_hz_);
    audio_.insert(audio_.end(), resampled.begin(), resampled.end());
    previous_punctuation_ = punctuation;
    return absl::OkStatus();
  }

  Espeak* const espeak_;
  const int sample_rate_hz_;
  const SpeechVoice voice_;
  // espeak-ng's rate for voice_.speed; 0: its own.
  const int words_per_minute_;
  const uint32_t max_tokens_;
  const size_t chunk_samples_;
  size_t consumed_ = 0;            // codes taken into clauses
  char previous_punctuation_ = 0;  // of the last clause spoken; '\0' before the first
  std::vector<int16_t> audio_;     // spoken and not yet emitted, from next_sample_
  size_t next_sample_ = 0;
};

}  // namespace

SpeechVoice ReadSpeechVoice(EngineParams* extra, const Espeak& espeak) {
  SpeechVoice voice;
  voice.variant = extra->Enum("voice", "", espeak.variants());
  voice.speed = extra->Double("speed", 1.0, kMinSpeed, kMaxSpeed);
  return voice;
}

std::unique_ptr<RequestGenerator> NewSpeechVocoderRequest(Espeak* espeak, int sample_rate_hz,
                                                          SpeechVoice voice,
                                                          const RequestSettings& settings) {
  return std::make_unique<SpeechVocoderRequest>(espeak, sample_rate_hz, std::move(voice),
                                                settings);
}

}  // namespace omnistage
