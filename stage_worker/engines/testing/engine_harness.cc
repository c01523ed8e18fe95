#include "stage_worker/engines/testing/engine_harness.h"

#include <utility>

#include "gtest/gtest.h"
#include "stage_worker/engines/registry.h"

namespace omnistage {
namespace engine_testing {

std::unique_ptr<Engine> MustCreate(const std::string& name,
                                   const std::map<std::string, std::string>& params) {
  absl::StatusOr<std::unique_ptr<Engine>> engine = CreateEngine(name, params);
  EXPECT_TRUE(engine.ok()) << engine.status();
  return engine.ok() ? *std::move(engine) : nullptr;
}

EngineRequest MakeRequest(std::string id, std::vector<v1::Payload> input, bool input_complete,
                          std::optional<uint32_t> max_tokens, std::optional<uint64_t> seed) {
  EngineRequest request;
  request.id = std::move(id);
  request.input = std::move(input);
  request.input_complete = input_complete;
  if (max_tokens.has_value()) request.params.set_max_tokens(*max_tokens);
  if (seed.has_value()) request.params.set_seed(*seed);
  return request;
}

void Collect(const std::vector<v1::RequestOutput>& outputs,
             std::map<std::string, Collected>* by_id) {
  for (const v1::RequestOutput& output : outputs) {
    Collected& c = (*by_id)[output.request_id()];
    ++c.outputs;
    for (const v1::Payload& payload : output.payloads()) {
      if (payload.has_text()) {
        c.text += payload.text().text();
        c.texts.push_back(payload.text());
      }
      if (payload.has_tokens()) {
        c.tokens.insert(c.tokens.end(), payload.tokens().ids().begin(),
                        payload.tokens().ids().end());
      }
      if (payload.has_audio()) c.pcm += payload.audio().pcm_s16le();
    }
    if (output.finished()) {
      c.finished = true;
      c.finish_reason = output.finish_reason();
      c.error_code = output.error().code();
    }
  }
}

std::vector<int16_t> PcmSamples(const std::string& pcm) {
  std::vector<int16_t> samples;
  for (size_t i = 0; i + 1 < pcm.size(); i += 2) {
    samples.push_back(static_cast<int16_t>(static_cast<uint8_t>(pcm[i]) |
                                           (static_cast<uint8_t>(pcm[i + 1]) << 8)));
  }
  return samples;
}

std::map<std::string, Collected> RunToCompletion(Engine* engine, int max_steps) {
  std::map<std::string, Collected> by_id;
  for (int i = 0; i < max_steps && engine->HasWork(); ++i) {
    absl::StatusOr<std::vector<v1::RequestOutput>> outputs = engine->Step();
    if (!outputs.ok()) {
      by_id[""].error_code = static_cast<int>(outputs.status().code());
      break;
    }
    Collect(*outputs, &by_id);
  }
  return by_id;
}

std::vector<v1::RequestOutput> MustStep(Engine* engine) {
  absl::StatusOr<std::vector<v1::RequestOutput>> outputs = engine->Step();
  EXPECT_TRUE(outputs.ok()) << outputs.status();
  return outputs.ok() ? *outputs : std::vector<v1::RequestOutput>{};
}

namespace {

class EchoGenerator : public RequestGenerator {
 public:
  explicit EchoGenerator(uint32_t max_tokens) : max_tokens_(max_tokens) {}
  bool Ready(const RequestInput& input) const override {
    return next_ < input.text.size() || input.complete;
  }
  GeneratedStep Step(const RequestInput& input) override {
    GeneratedStep step;
    if (next_ < input.text.size()) {
      step.payloads.push_back(TextPayload(input.text.substr(next_++, 1)));
    }
    if (next_ >= max_tokens_) {
      step.finish_reason = v1::FINISH_REASON_LENGTH;
    } else if (input.complete && next_ == input.text.size()) {
      step.finish_reason = v1::FINISH_REASON_STOP;
    }
    return step;
  }

 private:
  const uint32_t max_tokens_;
  size_t next_ = 0;
};

}  // namespace

std::unique_ptr<RequestGenerator> EchoEngine::NewGenerator(const RequestSettings& settings) const {
  return std::make_unique<EchoGenerator>(settings.max_tokens);
}

}  // namespace engine_testing
}  // namespace omnistage
