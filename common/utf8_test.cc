#include "common/utf8.h"

#include <string>

#include "gtest/gtest.h"

namespace omnistage {
namespace {

TEST(Utf8Test, ValidTextHasNoBadByte) {
  for (const std::string& text :
       {std::string(""), std::string("plain ascii"), std::string("caf\xc3\xa9"),
        std::string("\xe2\x82\xac 5"), std::string("\xf0\x9f\x8c\x8a sea"),
        std::string("\xef\xbf\xbf"), std::string("\xf4\x8f\xbf\xbf"), std::string("a\0b", 3)}) {
    EXPECT_EQ(FirstInvalidUtf8(text), std::nullopt) << text;
  }
}

TEST(Utf8Test, TheFirstBadByteIsFound) {
  EXPECT_EQ(FirstInvalidUtf8("\xff"), 0u);
  EXPECT_EQ(FirstInvalidUtf8("ok \xc3"), 3u);           // cut short
  EXPECT_EQ(FirstInvalidUtf8("ab\xc3x"), 2u);           // a continuation missing
  EXPECT_EQ(FirstInvalidUtf8("\xc0\xaf"), 0u);          // overlong '/'
  EXPECT_EQ(FirstInvalidUtf8("\xe0\x80\xaf"), 0u);      // overlong
  EXPECT_EQ(FirstInvalidUtf8("x\xed\xa0\x80"), 1u);     // a surrogate
  EXPECT_EQ(FirstInvalidUtf8("\xf4\x90\x80\x80"), 0u);  // past U+10FFFF
  EXPECT_EQ(FirstInvalidUtf8("\xc3\xa9\x80"), 2u);      // a stray continuation
  EXPECT_EQ(FirstInvalidUtf8("\xf5\x80\x80\x80"), 0u);
}

}  // namespace
}  // namespace omnistage
