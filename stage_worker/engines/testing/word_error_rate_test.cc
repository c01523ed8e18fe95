#include "stage_worker/engines/testing/word_error_rate.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace omnistage {
namespace {

using ::testing::ElementsAre;

TEST(WordErrorRateTest, NormalizesCaseAndPunctuation) {
  EXPECT_THAT(NormalizedWords("Hello, World!  Don't\tstop."),
              ElementsAre("hello", "world", "don't", "stop"));
  EXPECT_THAT(NormalizedWords(" ,. "), ElementsAre());
}

TEST(WordErrorRateTest, CountsEachKindOfEdit) {
  EXPECT_EQ(CountWordErrors("the cat sat", "The cat sat.").edits, 0);
  EXPECT_EQ(CountWordErrors("the cat sat", "the cat sad").edits, 1);       // substitution
  EXPECT_EQ(CountWordErrors("the cat sat", "the sat").edits, 1);           // deletion
  EXPECT_EQ(CountWordErrors("the cat sat", "the fat cat sat").edits, 1);   // insertion
  EXPECT_EQ(CountWordErrors("a b c d", "b c d e").edits, 2);               // shifted by one
  EXPECT_EQ(CountWordErrors("a b c", "").edits, 3);
  EXPECT_EQ(CountWordErrors("", "a b").edits, 2);
  EXPECT_EQ(CountWordErrors("a b c", "c b a").edits, 2);
}

TEST(WordErrorRateTest, RateIsEditsPerReferenceWord) {
  WordErrors errors = CountWordErrors("the cat sat on the mat", "the cat sad on mat");
  EXPECT_EQ(errors.edits, 2);
  EXPECT_EQ(errors.reference_words, 6);
  EXPECT_DOUBLE_EQ(errors.rate(), 2.0 / 6);
  errors += CountWordErrors("one two", "one two");
  EXPECT_DOUBLE_EQ(errors.rate(), 2.0 / 8);
  EXPECT_DOUBLE_EQ(CountWordErrors("", "").rate(), 0);
}

}  // namespace
}  // namespace omnistage
