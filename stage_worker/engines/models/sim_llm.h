// sim_llm: a simulated LLM for tests and benchmarks.
//
// Input: text and/or token payloads; it starts once the input is complete. Each
// step emits exactly one token per running request, drawn from splitmix64 seeded
// by a hash of the whole input and the request's seed (so the output does not
// depend on batching, other requests or input chunking). Finishes with
// FINISH_REASON_LENGTH after max_tokens tokens.
//
// Parameters (besides BatchingOptions'): `vocab_size` (default 32000): token ids
// lie in [0, vocab_size); `output` ("tokens", default, or "text"): emit each
// token as a TokenIds payload with one id, or as a TextDelta of a word.
#ifndef OMNISTAGE_STAGE_WORKER_ENGINES_MODELS_SIM_LLM_H_
#define OMNISTAGE_STAGE_WORKER_ENGINES_MODELS_SIM_LLM_H_

#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "stage_worker/engines/base/engine.h"

namespace omnistage {

inline constexpr char kSimLlmEngineName[] = "sim_llm";

absl::StatusOr<std::unique_ptr<Engine>> CreateSimLlmEngine(
    const std::map<std::string, std::string>& params);

}  // namespace omnistage

#endif  // OMNISTAGE_STAGE_WORKER_ENGINES_MODELS_SIM_LLM_H_
