#include "stage_worker/engines/testing/phoneme_clauses.h"

#include "gtest/gtest.h"
#include "stage_worker/engines/speech/phoneme_codes.h"

namespace omnistage {
namespace engine_testing {

std::vector<std::pair<std::string, char>> PhonemeClauses(const std::vector<int32_t>& codes) {
  std::vector<std::pair<std::string, char>> clauses;
  std::vector<int32_t> clause;
  for (int32_t code : codes) {
    if (!IsClauseEnd(code)) {
      clause.push_back(code);
      continue;
    }
    clauses.emplace_back(PhonemeText(clause), ClauseEndPunctuation(code));
    clause.clear();
  }
  EXPECT_TRUE(clause.empty()) << clause.size() << " codes after the last clause end";
  return clauses;
}

}  // namespace engine_testing
}  // namespace omnistage
