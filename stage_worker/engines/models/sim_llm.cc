#include "stage_worker/engines/models/sim_llm.h"

#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "stage_worker/engines/base/batching_engine.h"
#include "stage_worker/engines/base/engine_params.h"
#include "stage_worker/engines/models/prng.h"
#include "stage_worker/engines/models/words.h"

namespace omnistage {
namespace {

struct SimLlmOptions {
  int32_t vocab_size = 32000;
  bool text_output = false;
};

class SimLlmGenerator : public RequestGenerator {
 public:
  SimLlmGenerator(const SimLlmOptions& options, const RequestSettings& settings)
      : options_(options), max_tokens_(settings.max_tokens), seed_(settings.seed) {}

  // Like a real LLM, it prefills the whole prompt before the first token.
  bool Ready(const RequestInput& input) const override { return input.complete; }

  GeneratedStep Step(const RequestInput& input) override {
    if (!rng_.has_value()) {
      rng_.emplace(
          HashCombine(HashCombine(HashBytes(input.text), HashTokens(input.tokens)), seed_));
    }
    const auto token = static_cast<int32_t>(rng_->Below(options_.vocab_size));
    GeneratedStep step;
    if (options_.text_output) {
      absl::Span<const absl::string_view> words = AllWords();
      step.payloads.push_back(
          TextPayload(absl::StrCat(produced_ == 0 ? "" : " ", words[token % words.size()])));
    } else {
      step.payloads.push_back(TokensPayload({token}));
    }
    if (++produced_ >= max_tokens_) step.finish_reason = v1::FINISH_REASON_LENGTH;
    return step;
  }

 private:
  const SimLlmOptions options_;
  const uint32_t max_tokens_;
  const uint64_t seed_;
  std::optional<SplitMix64> rng_;  // seeded at the first step, from the full input
  uint32_t produced_ = 0;
};

class SimLlmEngine : public BatchingEngine {
 public:
  SimLlmEngine(BatchingOptions batching, SimLlmOptions options)
      : BatchingEngine(kSimLlmEngineName, {v1::Payload::kText, v1::Payload::kTokens}, batching),
        options_(options) {}

 protected:
  std::unique_ptr<RequestGenerator> NewGenerator(const RequestSettings& settings) const override {
    return std::make_unique<SimLlmGenerator>(options_, settings);
  }

 private:
  const SimLlmOptions options_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Engine>> CreateSimLlmEngine(
    const std::map<std::string, std::string>& params) {
  EngineParams reader(kSimLlmEngineName, params);
  BatchingOptions batching = BatchingOptions::Read(&reader);
  SimLlmOptions options;
  options.vocab_size =
      static_cast<int32_t>(reader.Int("vocab_size", options.vocab_size, 1, 1 << 30));
  options.text_output = reader.Enum("output", "tokens", {"tokens", "text"}) == "text";
  absl::Status status = reader.Finish();
  if (!status.ok()) return status;
  return std::make_unique<SimLlmEngine>(batching, options);
}

}  // namespace omnistage
