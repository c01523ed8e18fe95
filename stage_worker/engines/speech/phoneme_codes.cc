#include "stage_worker/engines/speech/phoneme_codes.h"

#include <algorithm>

#include "absl/container/flat_hash_map.h"

namespace omnistage {
namespace {

constexpr char kClauseEndPunctuation[] = {'.', '?', '!', ','};
constexpr int32_t kClauseEnds = 4;
constexpr int32_t kFirstPhonemeCode = kWordBreakCode + 1;

// espeak-ng 1.51's phoneme table "en" with the tables it includes (base1,
// base), in phoneme-code order, as written in espeak-ng-data/phontab. Left out:
// the nameless phoneme 0, a control-character name, and variants whose name has
// a '/', which espeak-ng writes under the name before the '/' (also listed).
constexpr absl::string_view kPhonemes[] = {
    "%",  "%%",  ",",   ",,",  "'",  "''",  "=",   "_:",  "_",   "_!",  ":",  "@",   "@-", "||",
    "*",  "1",   "#X1", "?",   "-",  "_^_", "_X1", "_|",  "_::", "t#",  "'!", "_;_", "#@", "#a",
    "#e", "#i",  "#o",  "#u",  "r",  "a",   "e",   "i",   ";",   "o",   "u",  "m-",  "n-", "N-",
    "r-", "l-",  "t",   "p",   "k",  "n",   "R",   "R2",  "R3",  "r\"", "l",  "j",   "w",  "l^",
    "l.", "L",   "h",   "m",   "n.", "n^",  "N",   "**",  "r.",  "b",   "d",  "d[",  "t[", "dZ",
    "tS", "dZ;", "tS;", "J",   "c",  "g",   "B",   "f",   "v",   "v#",  "D",  "T",   "z",  "s",
    "Z",  "S",   "z.",  "s.",  "z;", "s;",  "Z;",  "S;",  "J^",  "C",   "Q",  "x",   "Q^", "Q\"",
    "q",  "l#",  "X",   "t2",  "d#", "z#",  "3",   "I2",  "w#",  "@2",  "@5", "U",   "@L", "a#",
    "a2", "aa",  "A:",  "E",   "E#", "E2",  "I",   "I#",  "I2#", "0",   "0#", "02",  "O2", "V",
    "A@", "A#",  "3:",  "i:",  "O:", "O",   "O@",  "o@",  "u:",  "aU",  "oU", "oU#", "aI", "eI",
    "OI", "e@",  "i@",  "i@3", "U@", "aI@", "aI3", "aU@", "IR",  "VR",  "o:", "A~",  "O~", "e:",
    "e#", "a#2", "@#",
};
constexpr int32_t kPhonemeCount = sizeof(kPhonemes) / sizeof(kPhonemes[0]);
constexpr size_t kLongestName = 3;

// Name -> code. Built once, never destroyed.
const absl::flat_hash_map<absl::string_view, int32_t>& CodesByName() {
  static const auto* const kCodes = [] {
    auto* codes = new absl::flat_hash_map<absl::string_view, int32_t>();
    for (int32_t i = 0; i < kPhonemeCount; ++i) codes->emplace(kPhonemes[i], kFirstPhonemeCode + i);
    return codes;
  }();
  return *kCodes;
}

// Appends the codes of one phoneme as written (stress mark, name, length mark
// ...), longest known name first, as espeak-ng reads phoneme input.
void AppendWritten(absl::string_view written, std::vector<int32_t>* codes) {
  const auto& by_name = CodesByName();
  while (!written.empty()) {
    if (written.front() == '(') {
      // A language switch, "(fr)": its letters are no phonemes.
      const size_t close = written.find(')');
      written.remove_prefix(close == absl::string_view::npos ? written.size() : close + 1);
      continue;
    }
    size_t length = std::min(kLongestName, written.size());
    for (; length > 0; --length) {
      auto it = by_name.find(written.substr(0, length));
      if (it == by_name.end()) continue;
      codes->push_back(it->second);
      break;
    }
    written.remove_prefix(std::max<size_t>(length, 1));
  }
}

}  // namespace

int32_t PhonemeCodeCount() { return kFirstPhonemeCode + kPhonemeCount; }

int32_t ClauseEndCode(char punctuation) {
  for (int32_t code = 0; code < kClauseEnds - 1; ++code) {
    if (kClauseEndPunctuation[code] == punctuation) return code;
  }
  return kClauseEnds - 1;
}

bool IsClauseEnd(int32_t code) { return code >= 0 && code < kClauseEnds; }

char ClauseEndPunctuation(int32_t code) {
  return IsClauseEnd(code) ? kClauseEndPunctuation[code] : ',';
}

void AppendPhonemeCodes(absl::string_view clause, std::vector<int32_t>* codes) {
  size_t start = 0;
  for (size_t i = 0; i <= clause.size(); ++i) {
    if (i < clause.size() && clause[i] != ' ' && clause[i] != kPhonemeSeparator) continue;
    AppendWritten(clause.substr(start, i - start), codes);
    if (i < clause.size() && clause[i] == ' ') codes->push_back(kWordBreakCode);
    start = i + 1;
  }
}

std::string PhonemeText(absl::Span<const int32_t> codes) {
  std::string text;
  for (int32_t code : codes) {
    if (code == kWordBreakCode) {
      text += ' ';
    } else if (code >= kFirstPhonemeCode && code < PhonemeCodeCount()) {
      const absl::string_view name = kPhonemes[code - kFirstPhonemeCode];
      text.append(name.data(), name.size());
    }
  }
  return text;
}

}  // namespace omnistage
