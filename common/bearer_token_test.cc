// CleanBearerToken and CleanAuthorization: surrounding whitespace goes, a
// token with anything but visible ASCII inside is refused, and no message
// shows the token or any part of it.
#include "common/bearer_token.h"

#include <cstdlib>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace omnistage {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kToken[] = "d20f269362e3e0000d56022059fcd33c";

TEST(BearerTokenTest, SurroundingWhitespaceIsNotPartOfTheToken) {
  for (const std::string& raw : {std::string(kToken), std::string(kToken) + "\n",
                                std::string(kToken) + "\r\n", " \t" + std::string(kToken) + " \n\n"}) {
    absl::StatusOr<std::string> token = CleanBearerToken(raw, "$OMNISTAGE_TOKEN");
    ASSERT_TRUE(token.ok()) << token.status();
    EXPECT_EQ(*token, kToken);
  }
  EXPECT_EQ(*CleanBearerToken("", "x"), "");
  EXPECT_EQ(*CleanBearerToken(" \n", "x"), "");
}

TEST(BearerTokenTest, AnInnerControlCharacterIsRefusedWithoutShowingTheToken) {
  const std::string secret = "d20f2693\x01" "62e3e0000d560";
  const struct {
    std::string raw;
    const char* kind;
  } cases[] = {
      {secret, "a control character (character 9)"},
      {"d20f2693\n62e3e0000d560\n", "a control character (character 9)"},
      {"d20f2693 62e3e0000d560", "a space (character 9)"},
      {"d20f2693\xc3\xa9" "62e3e0000d560", "a byte beyond ASCII (character 9)"},
  };
  for (const auto& c : cases) {
    absl::StatusOr<std::string> token = CleanBearerToken(c.raw, "--token_file=/tmp/user.token");
    ASSERT_FALSE(token.ok());
    EXPECT_EQ(token.status().code(), absl::StatusCode::kInvalidArgument);
    const std::string message(token.status().message());
    EXPECT_THAT(message, HasSubstr("--token_file=/tmp/user.token: the bearer token holds"));
    EXPECT_THAT(message, HasSubstr(c.kind));
    // Neither half of the token, nor a few of its characters.
    EXPECT_THAT(message, Not(HasSubstr("d20f")));
    EXPECT_THAT(message, Not(HasSubstr("e3e0")));
  }
}

TEST(BearerTokenTest, AuthorizationHeaders) {
  EXPECT_EQ(*CleanAuthorization(std::string("Bearer ") + kToken), std::string("Bearer ") + kToken);
  EXPECT_EQ(*CleanAuthorization(std::string("  bearer   ") + kToken + " \t"),
            std::string("Bearer ") + kToken);
  // Other schemes go on as they are; the orchestrator says what it wants.
  EXPECT_EQ(*CleanAuthorization("Basic dXNlcjpwYXNz"), "Basic dXNlcjpwYXNz");
  EXPECT_EQ(*CleanAuthorization(""), "");
  for (const std::string& header :
       {std::string("Bearer d20f2693\x01" "62e3e0"), std::string("Bearer d20f2693\t62e3e0"),
        std::string("Basic d20f2693\x7f" "62e3e0")}) {
    absl::StatusOr<std::string> cleaned = CleanAuthorization(header);
    ASSERT_FALSE(cleaned.ok()) << header;
    const std::string message(cleaned.status().message());
    EXPECT_THAT(message, HasSubstr("the Authorization header"));
    EXPECT_THAT(message, HasSubstr("control character"));
    EXPECT_THAT(message, Not(HasSubstr("d20f")));
  }
}

// A token file: its token without the newline an editor leaves; one that
// cannot be read, or holds a bad byte, says which flag and file.
TEST(BearerTokenTest, ReadsATokenFileNamingItsFlag) {
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string path = std::string(dir != nullptr ? dir : "/tmp") + "/gateway.token";
  std::ofstream(path) << kToken << "\n";
  EXPECT_EQ(*ReadBearerTokenFile(path, "--batch_token_file"), kToken);
  absl::StatusOr<std::string> missing = ReadBearerTokenFile(path + ".nope", "--batch_token_file");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().message(), "--batch_token_file: cannot read " + path + ".nope");
  std::ofstream(path) << "d20f2693 62e3e0\n";
  absl::StatusOr<std::string> spaced = ReadBearerTokenFile(path, "--token_file");
  ASSERT_FALSE(spaced.ok());
  EXPECT_THAT(std::string(spaced.status().message()),
              HasSubstr("--token_file=" + path + ": the bearer token holds a space"));
}

}  // namespace
}  // namespace omnistage
