#include "stage_worker/engines/speech/phoneme_codes.h"

#include <set>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "stage_worker/engines/speech/espeak.h"

namespace omnistage {
namespace {

using ::testing::Each;
using ::testing::ElementsAre;
using ::testing::Ge;
using ::testing::Lt;

std::vector<int32_t> Codes(absl::string_view clause) {
  std::vector<int32_t> codes;
  AppendPhonemeCodes(clause, &codes);
  return codes;
}

TEST(PhonemeCodesTest, ClauseEnds) {
  EXPECT_EQ(ClauseEndCode('.'), 0);
  EXPECT_EQ(ClauseEndCode('?'), 1);
  EXPECT_EQ(ClauseEndCode('!'), 2);
  EXPECT_EQ(ClauseEndCode(','), 3);
  EXPECT_EQ(ClauseEndCode(';'), 3);
  for (char c : {'.', '?', '!', ','}) {
    EXPECT_TRUE(IsClauseEnd(ClauseEndCode(c)));
    EXPECT_EQ(ClauseEndPunctuation(ClauseEndCode(c)), c);
  }
  EXPECT_FALSE(IsClauseEnd(kWordBreakCode));
  EXPECT_FALSE(IsClauseEnd(-1));
  EXPECT_FALSE(IsClauseEnd(kWordBreakCode + 1));
  // 157 names of espeak-ng 1.51's English phonemes after the five fixed codes.
  EXPECT_EQ(PhonemeCodeCount(), 5 + 157);
}

TEST(PhonemeCodesTest, OneCodePerPhonemeAndMark) {
  const std::vector<int32_t> hello = Codes("h\x1f@\x1fl\x1f'oU");
  ASSERT_EQ(hello.size(), 5u);  // h @ l ' oU
  EXPECT_EQ(PhonemeText(hello), "h@l'oU");
  EXPECT_EQ(PhonemeText({hello[3]}), "'");
  EXPECT_EQ(PhonemeText({hello[4]}), "oU");
  // Words are apart; a length mark written with a phoneme is a code of its own
  // unless the long phoneme has a name ("i:").
  const std::vector<int32_t> two = Codes("p\x1f'E: s\x1f'i:");
  EXPECT_THAT(two, ElementsAre(Codes("p")[0], Codes("'")[0], Codes("E")[0], Codes(":")[0],
                               kWordBreakCode, Codes("s")[0], Codes("'")[0], Codes("i:")[0]));
  EXPECT_EQ(PhonemeText(two), "p'E: s'i:");
  // A language switch is no phoneme.
  EXPECT_EQ(PhonemeText(Codes("(fr)b\x1f'O~")), "b'O~");
}

TEST(PhonemeCodesTest, PhonemeTextSkipsWhatIsNoPhoneme) {
  const std::vector<int32_t> hello = Codes("h\x1f@\x1fl\x1f'oU");
  std::vector<int32_t> noisy = {ClauseEndCode('.'), -7, hello[0], PhonemeCodeCount(), 100000};
  noisy.insert(noisy.end(), hello.begin() + 1, hello.end());
  noisy.push_back(ClauseEndCode(','));
  EXPECT_EQ(PhonemeText(noisy), "h@l'oU");
}

// The inventory covers what espeak-ng writes: each clause's codes read back as
// exactly espeak-ng's own phonemes for it.
TEST(PhonemeCodesTest, RoundTripsEspeaksPhonemes) {
  absl::StatusOr<Espeak*> espeak = Espeak::Get();
  ASSERT_TRUE(espeak.ok()) << espeak.status();
  const std::string text =
      "Hello, world. Is this a question? Yes, it is; really: 3.14 apples, Dr. Smith said. "
      "The quiet river sings softly near the old bridge! Bourgeois entrepreneurs eat croissants "
      "and drink cafe au lait in Zurich. Joyful thoughts, measured rhythm, unusual vision; "
      "the year 1984 (or 2024) - 50% off! Ünïcode too. Привет мир.";
  const std::vector<std::string> plain = (*espeak)->Phonemes(text);
  const std::vector<std::string> separated = (*espeak)->Phonemes(text, kPhonemeSeparator);
  ASSERT_EQ(plain.size(), separated.size());
  ASSERT_GT(plain.size(), 10u);
  std::set<int32_t> used;
  for (size_t i = 0; i < plain.size(); ++i) {
    const std::vector<int32_t> codes = Codes(separated[i]);
    EXPECT_THAT(codes, Each(Ge(0)));
    EXPECT_THAT(codes, Each(Lt(PhonemeCodeCount())));
    EXPECT_EQ(PhonemeText(codes), plain[i]) << "clause " << i;
    used.insert(codes.begin(), codes.end());
  }
  EXPECT_GT(used.size(), 40u);
}

}  // namespace
}  // namespace omnistage
