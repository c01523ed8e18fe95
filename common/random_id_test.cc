#include "common/random_id.h"

#include <set>

#include "gtest/gtest.h"

namespace omnistage {
namespace {

TEST(RandomHexTest, HasTwoHexDigitsPerByte) {
  const std::string id = RandomHex(16);
  ASSERT_EQ(id.size(), 32u);
  EXPECT_EQ(id.find_first_not_of("0123456789abcdef"), std::string::npos) << id;
  EXPECT_EQ(RandomHex(0), "");
}

TEST(RandomHexTest, DoesNotRepeat) {
  std::set<std::string> seen;
  for (int i = 0; i < 1000; ++i) EXPECT_TRUE(seen.insert(RandomHex(16)).second);
}

TEST(SameSecretTest, ComparesWholeStrings) {
  EXPECT_TRUE(SameSecret("3-abcdef", "3-abcdef"));
  EXPECT_TRUE(SameSecret("", ""));
  EXPECT_FALSE(SameSecret("3-abcdef", "3-abcdeg"));
  EXPECT_FALSE(SameSecret("3", "3-abcdef"));
}

}  // namespace
}  // namespace omnistage
