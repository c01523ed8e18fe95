#include "stage_worker/engines/speech/espeak.h"

#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace omnistage {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

Espeak& MustGet() {
  absl::StatusOr<Espeak*> espeak = Espeak::Get();
  EXPECT_TRUE(espeak.ok()) << espeak.status();
  if (!espeak.ok()) std::abort();
  return **espeak;
}

std::vector<int16_t> MustSpeak(absl::string_view text) {
  absl::StatusOr<std::vector<int16_t>> samples = MustGet().Speak(text);
  EXPECT_TRUE(samples.ok()) << samples.status();
  return samples.ok() ? *std::move(samples) : std::vector<int16_t>();
}

int Peak(const std::vector<int16_t>& samples) {
  int peak = 0;
  for (int16_t s : samples) peak = std::max(peak, std::abs(static_cast<int>(s)));
  return peak;
}

TEST(EspeakTest, StartsWithDebiansDataAndRate) {
  EXPECT_EQ(MustGet().sample_rate_hz(), 22050);
  EXPECT_EQ(&MustGet(), *Espeak::Get());
}

TEST(EspeakTest, PhonemesAreEspeaksClauseByClause) {
  EXPECT_THAT(MustGet().Phonemes("Hello, world."), ElementsAre("h@l'oU", "w'3:ld"));
  EXPECT_THAT(MustGet().Phonemes("The old bridge. A clock waits!"),
              ElementsAre("DI2; 'oUld br'IdZ", "a# kl'0k w'eIts"));
  EXPECT_THAT(MustGet().Phonemes(""), ElementsAre());
  EXPECT_THAT(MustGet().Phonemes(" ... "), ElementsAre());
  // A NUL byte reads as a space instead of ending the text.
  EXPECT_THAT(MustGet().Phonemes(std::string("Hello,\0world.", 13)),
              ElementsAre("h@l'oU", "w'3:ld"));
}

TEST(EspeakTest, SeparatorStandsBetweenPhonemesOnly) {
  const std::string text = "The quiet river sings softly near the old bridge, 3.14 times.";
  const std::vector<std::string> plain = MustGet().Phonemes(text);
  const std::vector<std::string> separated = MustGet().Phonemes(text, '|');
  ASSERT_EQ(separated.size(), plain.size());
  for (size_t i = 0; i < plain.size(); ++i) {
    EXPECT_EQ(absl::StrReplaceAll(separated[i], {{"|", ""}}), plain[i]);
  }
  EXPECT_THAT(MustGet().Phonemes("quiet", '|'), ElementsAre("k|w|'aI@|t"));
}

TEST(EspeakTest, PhonemesDoNotDependOnEarlierCalls) {
  const std::string text = "A clock waits. Is this a question? Yes, it is.";
  const std::vector<std::string> first = MustGet().Phonemes(text);
  MustGet().Phonemes("Something else entirely, \xff with commas; and more");
  MustSpeak("Spoken in between.");
  EXPECT_EQ(MustGet().Phonemes(text), first);
}

TEST(EspeakTest, SpeaksPhonemesDeterministically) {
  const std::vector<int16_t> first = MustSpeak("[[Iz DIs a# kw'EstS@n]]?");
  // About a second of audible, unclipped speech.
  EXPECT_GT(first.size(), 22050u / 2);
  EXPECT_LT(first.size(), 22050u * 2);
  EXPECT_GT(Peak(first), 32767 / 10);
  EXPECT_LT(Peak(first), 32767);
  // In espeak-ng's own process state, the same phonemes would not sound the
  // same after other speech; here they do.
  MustSpeak("Something else entirely, with commas.");
  MustGet().Phonemes("And some text translated.");
  EXPECT_EQ(MustSpeak("[[Iz DIs a# kw'EstS@n]]?"), first);
  // The punctuation after the phonemes sets the intonation.
  EXPECT_NE(MustSpeak("[[Iz DIs a# kw'EstS@n]]."), first);
}

TEST(EspeakTest, PhonemesSpeakLikeTheirText) {
  const std::string text = "The quiet river sings softly near the old bridge.";
  const std::vector<std::string> clauses = MustGet().Phonemes(text);
  ASSERT_EQ(clauses.size(), 1u);
  const double direct = static_cast<double>(MustSpeak(text).size());
  const double phonemes =
      static_cast<double>(MustSpeak(absl::StrCat("[[", clauses[0], "]]")).size());
  EXPECT_NEAR(phonemes / direct, 1.0, 0.05);
}

// The listener's tests speak American English; the worker's own voice stays "en".
TEST(EspeakTest, SpeaksInAnotherVoiceForOneCall) {
  const std::string text = "Can you tell me the way to the station?";
  absl::StatusOr<std::vector<int16_t>> american = MustGet().Speak(text, "", "en-us");
  ASSERT_TRUE(american.ok()) << american.status();
  EXPECT_GT(american->size(), 22050u / 2);
  EXPECT_NE(*american, MustSpeak(text));
  EXPECT_EQ(*MustGet().Speak(text, "", "en-us"), *american);
  EXPECT_EQ(MustGet().Speak(text, "", "no-such-voice").status().code(),
            absl::StatusCode::kInternal);
}

TEST(EspeakTest, PausesAfterClauses) {
  absl::StatusOr<int> full_stop = MustGet().PauseAfter('.');
  absl::StatusOr<int> comma = MustGet().PauseAfter(',');
  absl::StatusOr<int> question = MustGet().PauseAfter('?');
  absl::StatusOr<int> exclamation = MustGet().PauseAfter('!');
  ASSERT_TRUE(full_stop.ok() && comma.ok() && question.ok() && exclamation.ok());
  // espeak-ng pauses about 0.15 s after a comma and 0.3 s after a sentence.
  EXPECT_GT(*comma, 22050 / 20);
  EXPECT_GT(*full_stop, *comma);
  EXPECT_LT(*full_stop, 22050);
  EXPECT_GT(*question, *comma);
  EXPECT_GT(*exclamation, *comma);
  EXPECT_EQ(*MustGet().PauseAfter('.'), *full_stop);
  // Speaking two clauses in one call leaves that pause between them.
  const double apart = static_cast<double>(2 * MustSpeak("[[kl'0k]]").size() + *full_stop);
  const double together = static_cast<double>(MustSpeak("[[kl'0k]]. [[kl'0k]]").size());
  EXPECT_NEAR(together / apart, 1.0, 0.02);
  EXPECT_THAT(std::string(MustGet().PauseAfter(';').status().message()), HasSubstr("';'"));
}

TEST(EspeakTest, ThreadsShareIt) {
  const std::string text = "Hello, world. A clock waits!";
  const std::vector<std::string> phonemes = MustGet().Phonemes(text);
  const std::vector<int16_t> speech = MustSpeak("[[h@l'oU]]");
  std::vector<std::thread> threads;
  std::vector<int> same(4, 0);  // not vector<bool>: one element per thread
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      bool ok = true;
      for (int i = 0; i < 5; ++i) {
        ok = ok && MustGet().Phonemes(text) == phonemes;
        ok = ok && *MustGet().Speak("[[h@l'oU]]") == speech;
      }
      same[t] = ok ? 1 : 0;
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_THAT(same, ElementsAre(1, 1, 1, 1));
}

}  // namespace
}  // namespace omnistage
