#include "common/criticality.h"

#include "gtest/gtest.h"

namespace omnistage {
namespace {

TEST(CriticalityTest, NamesRoundTripInAnyCase) {
  for (v1::Criticality c :
       {v1::CRITICALITY_CRITICAL, v1::CRITICALITY_STANDARD, v1::CRITICALITY_SHEDDABLE}) {
    EXPECT_EQ(ParseCriticality(CriticalityName(c)), c);
  }
  EXPECT_EQ(ParseCriticality("Sheddable"), v1::CRITICALITY_SHEDDABLE);
  EXPECT_EQ(ParseCriticality("CRITICAL"), v1::CRITICALITY_CRITICAL);
}

TEST(CriticalityTest, AnythingElseIsNone) {
  EXPECT_EQ(ParseCriticality(""), std::nullopt);
  EXPECT_EQ(ParseCriticality("urgent"), std::nullopt);
  EXPECT_EQ(ParseCriticality("critical "), std::nullopt);
  EXPECT_STREQ(CriticalityName(v1::CRITICALITY_UNSPECIFIED), "");
  EXPECT_STREQ(CriticalityName(static_cast<v1::Criticality>(9)), "");
}

}  // namespace
}  // namespace omnistage
