#include "stage_worker/engines/models/listener.h"

#include <algorithm>
#include <deque>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/field_error.h"
#include "stage_worker/engines/base/batching_engine.h"
#include "stage_worker/engines/base/engine_params.h"
#include "stage_worker/engines/speech/pcm.h"
#include "stage_worker/engines/speech/resampler.h"
#include "stage_worker/engines/speech/sphinx_decoder.h"

namespace omnistage {
namespace {

constexpr char kModelDir[] = "/usr/share/pocketsphinx/model/en-us";
constexpr int kMinRateHz = 8000;
constexpr int kMaxRateHz = 384000;
constexpr int kMaxChannels = 32;
// What one ps_process_raw() call takes: pocketsphinx's voice activity
// detector is asked after each block whether the utterance went on.
constexpr size_t kBlockSamples = kSphinxSampleRateHz / 10;

struct ListenerOptions {
  std::shared_ptr<SphinxModel> model;
  size_t samples_per_step = 0;  // audio_ms_per_step at 16 kHz, whole blocks
};

// One run of the input: text, or audio resampled to 16 kHz up to the next
// text or change of format.
struct Piece {
  bool is_text = false;
  std::string text;
  std::vector<int16_t> samples;
  size_t fed = 0;       // samples decoded
  bool closed = false;  // audio: no more samples will join it
};

class ListenerRequest : public RequestGenerator {
 public:
  explicit ListenerRequest(const ListenerOptions& options) : options_(options) {}

  // Every payload: text and audio must keep their order.
  bool TakePayload(const v1::Payload& payload) override {
    if (payload.has_text()) {
      CloseAudio();
      Piece& piece = pieces_.emplace_back();
      piece.is_text = true;
      piece.text = payload.text().text();
      return true;
    }
    const v1::AudioChunk& audio = payload.audio();
    const int channels = audio.channels() == 0 ? 1 : audio.channels();
    if (resampler_ == nullptr || resampler_->from_hz() != audio.sample_rate_hz()) {
      CloseAudio();
      resampler_ = std::make_unique<StreamResampler>(audio.sample_rate_hz(), kSphinxSampleRateHz);
      pieces_.emplace_back();
    }
    resampler_->Push(MonoSamples(audio.pcm_s16le(), channels), &pieces_.back().samples);
    return true;
  }

  bool Ready(const RequestInput& input) const override {
    if (input.complete || pieces_.empty()) return input.complete;
    const Piece& next = pieces_.front();
    return next.is_text || next.closed || next.samples.size() - next.fed >= kBlockSamples;
  }

  GeneratedStep Step(const RequestInput& input) override {
    if (input.complete) CloseAudio();
    GeneratedStep step;
    std::vector<HeardUtterance> heard;
    absl::Status status = Decode(&heard, &step);
    if (status.ok() && input.complete && pieces_.empty()) {
      if (decoder_ != nullptr) status = decoder_->EndUtterance(/*more=*/false, &heard);
      if (status.ok()) {
        EmitWords(&heard, &step);
        step.finish_reason = v1::FINISH_REASON_STOP;
      }
    }
    if (!status.ok()) {
      step.payloads.clear();
      step.finish_reason = v1::FINISH_REASON_ERROR;
      step.error = status;
      return step;
    }
    EmitWords(&heard, &step);
    return step;
  }

 private:
  // Ends the current run of audio: what the resampler still holds joins it.
  void CloseAudio() {
    if (resampler_ == nullptr) return;
    resampler_->Flush(&pieces_.back().samples);
    pieces_.back().closed = true;
    resampler_.reset();
  }

  // Decodes the pieces in order, as far as the input and this step's share of
  // audio go; words heard go to `heard`, text through to `step` after them.
  absl::Status Decode(std::vector<HeardUtterance>* heard, GeneratedStep* step) {
    size_t budget = options_.samples_per_step;
    while (!pieces_.empty()) {
      Piece& piece = pieces_.front();
      if (piece.is_text) {
        if (decoder_ != nullptr) {
          absl::Status status = decoder_->EndUtterance(/*more=*/true, heard);
          if (!status.ok()) return status;
        }
        EmitWords(heard, step);
        Emit(std::move(piece.text), step);
        pieces_.pop_front();
        continue;
      }
      while (budget > 0) {
        const size_t left = piece.samples.size() - piece.fed;
        if (left == 0 || (left < kBlockSamples && !piece.closed)) break;
        const size_t block = std::min(left, kBlockSamples);
        if (decoder_ == nullptr) {
          // The engine holds a decoder per batch slot, and this request
          // holds a slot: one is free.
          decoder_ = options_.model->Acquire();
          if (decoder_ == nullptr) return absl::InternalError("engine listener: no free decoder");
          absl::Status status = decoder_->Start();
          if (!status.ok()) return status;
        }
        absl::Status status = decoder_->Feed(
            absl::MakeConstSpan(piece.samples).subspan(piece.fed, block), heard);
        if (!status.ok()) return status;
        piece.fed += block;
        budget -= std::min(budget, block);
      }
      if (!piece.closed || piece.fed < piece.samples.size()) break;
      pieces_.pop_front();
    }
    return absl::OkStatus();
  }

  // Each utterance heard: its words joined by spaces (a space before them
  // after earlier output that does not end in one), with their times.
  void EmitWords(std::vector<HeardUtterance>* heard, GeneratedStep* step) {
    for (HeardUtterance& utterance : *heard) {
      std::string text = absl::StrJoin(utterance, " ", [](std::string* out, const HeardWord& w) {
        out->append(w.word);
      });
      if (last_output_ != '\0' &&
          !absl::ascii_isspace(static_cast<unsigned char>(last_output_))) {
        text.insert(text.begin(), ' ');
      }
      v1::Payload payload = TextPayload(std::move(text));
      for (HeardWord& word : utterance) {
        v1::TimedWord* timed = payload.mutable_text()->add_words();
        timed->set_word(std::move(word.word));
        timed->set_start_ms(word.start_ms);
        timed->set_end_ms(word.end_ms);
      }
      last_output_ = payload.text().text().back();
      step->payloads.push_back(std::move(payload));
    }
    heard->clear();
  }

  void Emit(std::string text, GeneratedStep* step) {
    if (text.empty()) return;
    last_output_ = text.back();
    step->payloads.push_back(TextPayload(std::move(text)));
  }

  const ListenerOptions options_;
  std::deque<Piece> pieces_;
  std::unique_ptr<StreamResampler> resampler_;  // the open run of audio's
  std::shared_ptr<SphinxDecoder> decoder_;      // from the first audio on
  char last_output_ = '\0';                     // '\0': nothing emitted yet
};

class ListenerEngine : public BatchingEngine {
 public:
  ListenerEngine(BatchingOptions batching, ListenerOptions options)
      : BatchingEngine(kListenerEngineName, {v1::Payload::kAudio, v1::Payload::kText}, batching),
        options_(std::move(options)) {}

  // Decodes the audio as it arrives.
  StreamedInput streamed_input() const override { return StreamedInput::kIncremental; }
  // Not claimed: the replay harness (testing/replay_harness.h) cannot feed audio yet.
  ResumeMode resume_mode() const override { return ResumeMode::kNone; }

 protected:
  std::unique_ptr<RequestGenerator> NewGenerator(const RequestSettings& settings) const override {
    return std::make_unique<ListenerRequest>(options_);
  }

  absl::Status CheckPayload(const v1::Payload& payload) const override {
    if (!payload.has_audio()) return absl::OkStatus();
    const v1::AudioChunk& audio = payload.audio();
    if (audio.sample_rate_hz() < kMinRateHz || audio.sample_rate_hz() > kMaxRateHz) {
      return absl::InvalidArgumentError(absl::StrCat("sample_rate_hz must be in [", kMinRateHz,
                                                     ", ", kMaxRateHz, "], got ",
                                                     audio.sample_rate_hz()));
    }
    if (audio.channels() < 0 || audio.channels() > kMaxChannels) {
      return absl::InvalidArgumentError(
          absl::StrCat("channels must be in [0, ", kMaxChannels, "], got ", audio.channels()));
    }
    const size_t frame = 2 * static_cast<size_t>(audio.channels() == 0 ? 1 : audio.channels());
    if (audio.pcm_s16le().size() % frame != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("pcm_s16le holds ", audio.pcm_s16le().size(),
                       " bytes, not whole frames of ", frame, " bytes (16-bit samples, ",
                       frame / 2, " channel(s))"));
    }
    return absl::OkStatus();
  }

 private:
  const ListenerOptions options_;
};

// "41.0,-5.29,..." -> the numbers; false when one is not a number.
// Numbers separated by commas or spaces. Spaces are what a pipeline config
// needs: the orchestrator passes a spawned worker's engine_params as one
// --engine_params=k=v,k=v flag, where a comma inside a value would split it.
bool ParseNumbers(const std::string& text, std::vector<float>* numbers) {
  for (absl::string_view part : absl::StrSplit(text, absl::ByAnyChar(", "), absl::SkipEmpty())) {
    float value = 0;
    if (!absl::SimpleAtof(absl::StripAsciiWhitespace(part), &value)) return false;
    numbers->push_back(value);
  }
  return true;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Engine>> CreateListenerEngine(
    const std::map<std::string, std::string>& params) {
  EngineParams reader(kListenerEngineName, params);
  BatchingOptions defaults;
  defaults.batch_size = 4;  // a decoder per slot (sphinx_decoder.h)
  BatchingOptions batching = BatchingOptions::Read(&reader, defaults);
  SphinxOptions sphinx;
  sphinx.acoustic_model = reader.Text("acoustic_model", absl::StrCat(kModelDir, "/en-us"));
  sphinx.language_model = reader.Text("language_model", absl::StrCat(kModelDir, "/en-us.lm.bin"));
  sphinx.dictionary =
      reader.Text("dictionary", absl::StrCat(kModelDir, "/cmudict-en-us.dict"));
  const std::string cmn_init = reader.Text("cmn_init", "");
  const int64_t ms_per_step = reader.Int("audio_ms_per_step", 500, 100, 600000);
  if (absl::Status status = reader.Finish(); !status.ok()) return status;
  if (!cmn_init.empty() && !ParseNumbers(cmn_init, &sphinx.cmn_init)) {
    return AtField(absl::InvalidArgumentError(absl::StrCat(
                       "engine listener: parameter cmn_init: expected numbers separated by "
                       "spaces or commas, got '",
                       cmn_init, "'")),
                   "cmn_init");
  }
  sphinx.decoders = batching.batch_size;
  ListenerOptions options;
  // Whole blocks: a step's share never splits one.
  options.samples_per_step =
      (static_cast<size_t>(ms_per_step) * kSphinxSampleRateHz / 1000 + kBlockSamples - 1) /
      kBlockSamples * kBlockSamples;
  absl::StatusOr<std::shared_ptr<SphinxModel>> model = SphinxModel::Load(sphinx);
  if (absl::IsInvalidArgument(model.status())) return AtField(model.status(), "cmn_init");
  if (!model.ok()) return model.status();
  options.model = *std::move(model);
  return std::make_unique<ListenerEngine>(batching, std::move(options));
}

}  // namespace omnistage
