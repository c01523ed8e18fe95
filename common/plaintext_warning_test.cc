#include "common/plaintext_warning.h"

#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace omnistage {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;

TEST(IsLoopbackHostTest, OnlyLoopbackAddresses) {
  EXPECT_TRUE(IsLoopbackHost("127.0.0.1"));
  EXPECT_TRUE(IsLoopbackHost("127.3.2.1"));
  EXPECT_TRUE(IsLoopbackHost("localhost"));
  EXPECT_TRUE(IsLoopbackHost("[::1]"));
  EXPECT_TRUE(IsLoopbackHost("::1"));
  EXPECT_FALSE(IsLoopbackHost("0.0.0.0"));
  EXPECT_FALSE(IsLoopbackHost("[::]"));
  EXPECT_FALSE(IsLoopbackHost("10.0.0.1"));
  EXPECT_FALSE(IsLoopbackHost("omnistage-talker"));
}

// What `warn` writes on stderr, in lines.
template <typename F>
std::vector<std::string> Logged(F warn) {
  ::testing::internal::CaptureStderr();
  warn();
  std::vector<std::string> lines;
  for (absl::string_view line :
       absl::StrSplit(::testing::internal::GetCapturedStderr(), '\n', absl::SkipEmpty())) {
    lines.emplace_back(line);
  }
  return lines;
}

TEST(PlaintextWarningTest, WarnsOnlyForPlaintextBeyondLoopback) {
  EXPECT_THAT(Logged([] {
                WarnIfPlaintextExposed("the orchestrator", "127.0.0.1:50051", false);
                WarnIfPlaintextExposed("the orchestrator", "[::1]:0", false);
                WarnIfPlaintextExposed("the orchestrator", "0.0.0.0:50051", true);
              }),
              IsEmpty());
  const std::vector<std::string> lines =
      Logged([] { WarnIfPlaintextExposed("the orchestrator", "0.0.0.0:50051", false); });
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_THAT(lines[0], HasSubstr("PLAINTEXT: the orchestrator serves 0.0.0.0:50051 without "
                                   "TLS: anyone who can reach this port can use it"));
  EXPECT_THAT(lines[0], HasSubstr("see docs/security.md"));
}

TEST(PlaintextWarningTest, SaysWhatThisServerRisks) {
  const std::vector<std::string> lines = Logged([] {
    WarnIfPlaintextExposed("the gateway", "[::]:8000", false,
                           {"bearer tokens cross the network in the clear", "see docs/openai.md"});
  });
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_THAT(lines[0], HasSubstr("PLAINTEXT: the gateway serves [::]:8000 without TLS: bearer "
                                   "tokens cross the network in the clear. see docs/openai.md"));
}

}  // namespace
}  // namespace omnistage
