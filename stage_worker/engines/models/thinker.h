// thinker: a simulated text LLM (text -> text) that writes readable English.
//
// Once the prompt is complete it writes a paragraph of `sentences` sentences
// from a small fixed grammar and vocabulary, chosen by a hash of the prompt and
// the request's seed: one word per step as a TextDelta (" word" after the first),
// each sentence capitalized and ending with ".". Finishes with
// FINISH_REASON_STOP after the paragraph's last word, or FINISH_REASON_LENGTH
// after max_tokens words.
//
// Parameters (besides BatchingOptions'): `sentences` (default 2, 1..100).
// Per-request StageParameters.extra: `sentences` overrides it.
#ifndef OMNISTAGE_STAGE_WORKER_ENGINES_MODELS_THINKER_H_
#define OMNISTAGE_STAGE_WORKER_ENGINES_MODELS_THINKER_H_

#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "stage_worker/engines/base/engine.h"

namespace omnistage {

inline constexpr char kThinkerEngineName[] = "thinker";

absl::StatusOr<std::unique_ptr<Engine>> CreateThinkerEngine(
    const std::map<std::string, std::string>& params);

}  // namespace omnistage

#endif  // OMNISTAGE_STAGE_WORKER_ENGINES_MODELS_THINKER_H_
