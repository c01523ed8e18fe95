#include "stage_worker/engines/testing/word_error_rate.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/str_split.h"

namespace omnistage {

std::vector<std::string> NormalizedWords(absl::string_view text) {
  std::string kept;
  for (char c : text) {
    const auto u = static_cast<unsigned char>(c);
    // Bytes of UTF-8 characters (>= 0x80) are kept: they belong to words.
    if (absl::ascii_isalnum(u) || c == '\'' || u >= 0x80) {
      kept.push_back(absl::ascii_tolower(u));
    } else {
      kept.push_back(' ');
    }
  }
  return absl::StrSplit(kept, ' ', absl::SkipEmpty());
}

WordErrors CountWordErrors(absl::string_view reference, absl::string_view hypothesis) {
  const std::vector<std::string> ref = NormalizedWords(reference);
  const std::vector<std::string> hyp = NormalizedWords(hypothesis);
  // distance[j]: edits between the reference's first i words and the
  // hypothesis's first j, one row of the table at a time.
  std::vector<int> distance(hyp.size() + 1);
  for (size_t j = 0; j <= hyp.size(); ++j) distance[j] = static_cast<int>(j);
  for (size_t i = 1; i <= ref.size(); ++i) {
    int diagonal = distance[0];  // row i - 1, column j - 1
    distance[0] = static_cast<int>(i);
    for (size_t j = 1; j <= hyp.size(); ++j) {
      const int above = distance[j];
      distance[j] = std::min({above + 1,             // a reference word deleted
                              distance[j - 1] + 1,   // a hypothesis word inserted
                              diagonal + (ref[i - 1] == hyp[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return {distance[hyp.size()], static_cast<int>(ref.size())};
}

}  // namespace omnistage
