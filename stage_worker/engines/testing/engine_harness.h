// Helpers for engine tests: building requests and driving an engine by hand.
#ifndef OMNISTAGE_STAGE_WORKER_ENGINES_TESTING_ENGINE_HARNESS_H_
#define OMNISTAGE_STAGE_WORKER_ENGINES_TESTING_ENGINE_HARNESS_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "stage_worker/engines/base/batching_engine.h"
#include "stage_worker/engines/base/engine.h"

namespace omnistage {
namespace engine_testing {

// Creates engine `name` through the registry; a test failure, and nullptr, if
// that fails.
std::unique_ptr<Engine> MustCreate(const std::string& name,
                                   const std::map<std::string, std::string>& params = {});

EngineRequest MakeRequest(std::string id, std::vector<v1::Payload> input,
                          bool input_complete = true,
                          std::optional<uint32_t> max_tokens = std::nullopt,
                          std::optional<uint64_t> seed = std::nullopt);

// Everything one request produced, concatenated across steps.
struct Collected {
  std::string text;
  std::vector<v1::TextDelta> texts;  // each text payload, as it came
  std::vector<int32_t> tokens;
  std::string pcm;
  int outputs = 0;  // RequestOutputs seen
  bool finished = false;
  v1::FinishReason finish_reason = v1::FINISH_REASON_UNSPECIFIED;
  int error_code = 0;
};

// Appends `outputs` to `by_id`.
void Collect(const std::vector<v1::RequestOutput>& outputs,
             std::map<std::string, Collected>* by_id);

// The samples of pcm_s16le bytes.
std::vector<int16_t> PcmSamples(const std::string& pcm);

// Steps `engine` while it has work (at most `max_steps` times) and collects the
// outputs. An error from Step() is returned as the "" entry's error_code.
std::map<std::string, Collected> RunToCompletion(Engine* engine, int max_steps = 100000);

// One step, which must succeed (a test failure, and no outputs, otherwise).
std::vector<v1::RequestOutput> MustStep(Engine* engine);

// The BatchingEngine tests' engine ("echo"): echoes its text input one byte per
// step as soon as it arrives, enough to see every behaviour of the base,
// including streamed input. Stops at the end of its complete input (STOP) or
// after max_tokens bytes (LENGTH).
class EchoEngine : public BatchingEngine {
 public:
  explicit EchoEngine(BatchingOptions options)
      : BatchingEngine("echo", {v1::Payload::kText}, options) {}

 protected:
  std::unique_ptr<RequestGenerator> NewGenerator(const RequestSettings& settings) const override;
};

}  // namespace engine_testing
}  // namespace omnistage

#endif  // OMNISTAGE_STAGE_WORKER_ENGINES_TESTING_ENGINE_HARNESS_H_
