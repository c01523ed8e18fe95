// What a talker said, clause by clause: for tests that read its phoneme codes
// (stage_worker/engines/speech/phoneme_codes.h).
#ifndef OMNISTAGE_STAGE_WORKER_ENGINES_TESTING_PHONEME_CLAUSES_H_
#define OMNISTAGE_STAGE_WORKER_ENGINES_TESTING_PHONEME_CLAUSES_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace omnistage {
namespace engine_testing {

// `codes` split at their clause ends: each clause's phoneme text and the
// punctuation its end stands for. Codes after the last clause end are a test
// failure.
std::vector<std::pair<std::string, char>> PhonemeClauses(const std::vector<int32_t>& codes);

}  // namespace engine_testing
}  // namespace omnistage

#endif  // OMNISTAGE_STAGE_WORKER_ENGINES_TESTING_PHONEME_CLAUSES_H_
