#include "stage_worker/engines/models/talker.h"

#include <algorithm>
#include <vector>

#include "stage_worker/engines/base/batching_engine.h"
#include "stage_worker/engines/base/engine_params.h"
#include "stage_worker/engines/models/prng.h"
#include "stage_worker/engines/models/talker_phonemes.h"
#include "stage_worker/engines/speech/espeak.h"

namespace omnistage {
namespace {

// `codes: hashed`.
constexpr int kMaxFirstPieceWords = 1000;

int ReadFirstPieceWords(EngineParams* params, int default_value) {
  return static_cast<int>(params->Int("first_piece_words", default_value, 0, kMaxFirstPieceWords));
}

struct HashedOptions {
  int chars_per_step = 4;
  int codes_per_char = 2;
  int32_t codebook_size = 1024;
};

struct TalkerOptions {
  // `codes: phonemes` (the default): espeak-ng's phonemes; null for `hashed`.
  Espeak* espeak = nullptr;
  int codes_per_step = 32;
  int first_piece_words = 0;  // 0: the first piece is the first sentence
  HashedOptions hashed;
};

class HashedTalkerRequest : public RequestGenerator {
 public:
  HashedTalkerRequest(const HashedOptions& options, const RequestSettings& settings)
      : options_(options), max_tokens_(settings.max_tokens), seed_(Mix64(settings.seed)) {}

  bool Ready(const RequestInput& input) const override {
    return consumed_ < input.text.size() || input.complete;
  }

  GeneratedStep Step(const RequestInput& input) override {
    const size_t end =
        std::min(input.text.size(), consumed_ + static_cast<size_t>(options_.chars_per_step));
    std::vector<int32_t> codes;
    for (; consumed_ < end && produced_ < max_tokens_; ++consumed_) {
      const uint64_t char_hash = HashCombine(
          HashCombine(seed_, static_cast<unsigned char>(input.text[consumed_])), consumed_);
      for (int k = 0; k < options_.codes_per_char && produced_ < max_tokens_; ++k) {
        codes.push_back(static_cast<int32_t>(HashCombine(char_hash, k) % options_.codebook_size));
        ++produced_;
      }
    }
    GeneratedStep step;
    if (!codes.empty()) step.payloads.push_back(TokensPayload(codes));
    if (produced_ >= max_tokens_) {
      step.finish_reason = v1::FINISH_REASON_LENGTH;
    } else if (input.complete && consumed_ == input.text.size()) {
      step.finish_reason = v1::FINISH_REASON_STOP;
    }
    return step;
  }

 private:
  const HashedOptions options_;
  const uint32_t max_tokens_;
  const uint64_t seed_;
  size_t consumed_ = 0;    // input bytes turned into codes
  uint32_t produced_ = 0;  // codes emitted
};

class TalkerEngine : public BatchingEngine {
 public:
  TalkerEngine(BatchingOptions batching, TalkerOptions options)
      : BatchingEngine(kTalkerEngineName, {v1::Payload::kText}, batching), options_(options) {}

  // Speaks each sentence as its text arrives.
  StreamedInput streamed_input() const override { return StreamedInput::kIncremental; }

 protected:
  std::unique_ptr<RequestGenerator> NewGenerator(const RequestSettings& settings) const override {
    if (options_.espeak != nullptr) {
      // Validate() already accepted these extras, so reading them cannot fail.
      EngineParams extra(kTalkerEngineName, settings.extra, "extra parameter");
      return NewPhonemeTalkerRequest(options_.espeak, options_.codes_per_step,
                                     ReadFirstPieceWords(&extra, options_.first_piece_words),
                                     settings);
    }
    return std::make_unique<HashedTalkerRequest>(options_.hashed, settings);
  }

  // A request may set its own first piece (`codes: phonemes` only).
  void ReadExtra(EngineParams* extra) const override {
    if (options_.espeak != nullptr) ReadFirstPieceWords(extra, options_.first_piece_words);
  }

 private:
  const TalkerOptions options_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Engine>> CreateTalkerEngine(
    const std::map<std::string, std::string>& params) {
  EngineParams reader(kTalkerEngineName, params);
  BatchingOptions batching = BatchingOptions::Read(&reader);
  TalkerOptions options;
  if (reader.Enum("codes", "phonemes", {"phonemes", "hashed"}) == "phonemes") {
    options.codes_per_step =
        static_cast<int>(reader.Int("codes_per_step", options.codes_per_step, 1, 1 << 20));
    options.first_piece_words = ReadFirstPieceWords(&reader, options.first_piece_words);
    if (absl::Status status = reader.Finish(); !status.ok()) return status;
    absl::StatusOr<Espeak*> espeak = Espeak::Get();
    if (!espeak.ok()) return espeak.status();
    options.espeak = *espeak;
  } else {
    HashedOptions& hashed = options.hashed;
    hashed.chars_per_step =
        static_cast<int>(reader.Int("chars_per_step", hashed.chars_per_step, 1, 1 << 20));
    hashed.codes_per_char =
        static_cast<int>(reader.Int("codes_per_char", hashed.codes_per_char, 1, 64));
    hashed.codebook_size =
        static_cast<int32_t>(reader.Int("codebook_size", hashed.codebook_size, 2, 1 << 24));
  }
  absl::Status status = reader.Finish();
  if (!status.ok()) return status;
  return std::make_unique<TalkerEngine>(batching, options);
}

}  // namespace omnistage
