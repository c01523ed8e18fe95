#include "common/modality.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace omnistage {
namespace {

TEST(ModalityTest, NamesRoundTrip) {
  for (v1::Modality m : {v1::MODALITY_TEXT, v1::MODALITY_AUDIO, v1::MODALITY_TOKENS}) {
    absl::StatusOr<v1::Modality> parsed = ParseModality(ModalityName(m));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, m);
  }
  EXPECT_EQ(ModalityName(v1::MODALITY_UNSPECIFIED), "unspecified");
  EXPECT_EQ(ParseModality("unspecified").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(ParseModality("Text").status().message()),
              ::testing::HasSubstr("expected text, audio or tokens, got 'Text'"));
}

}  // namespace
}  // namespace omnistage
