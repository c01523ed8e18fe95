#include "common/invariant.h"

#include <algorithm>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace omnistage {
namespace {

TEST(InvariantTest, HoldingInvariantDoesNothing) {
  const uint64_t before = InvariantViolations();
  OMNISTAGE_INVARIANT(1 + 1 == 2, "arithmetic");
  EXPECT_TRUE(OMNISTAGE_INVARIANT_HOLDS(1 + 1 == 2, LogContext(), "arithmetic"));
  EXPECT_EQ(InvariantViolations(), before);
}

// Debug builds (every test and fuzzer): a broken invariant crashes at once,
// naming where and what.
TEST(InvariantDeathTest, BrokenInvariantCrashesNamingIt) {
  SetInvariantMode(InvariantMode::kCrash);
  EXPECT_DEATH(OMNISTAGE_INVARIANT(1 + 1 == 3, "a request ended twice"),
               "broken invariant at .*invariant_test.cc:[0-9]+: a request ended twice");
}

// Optimized builds: one error line through the logger (JSON here, with the
// request it concerns), counted, and the caller is told so that it fails what
// the invariant concerns.
TEST(InvariantTest, ReportedBrokenInvariantIsLoggedCountedAndReturned) {
  SetInvariantMode(InvariantMode::kReport);
  InitLogging({"orchestrator", LogFormat::kJson, LogLevel::kInfo});
  MetricsRegistry registry;
  AddInvariantMetric(&registry);
  const uint64_t before = InvariantViolations();
  testing::internal::CaptureStderr();
  const LogContext about{"req-7", 1, 0, ""};
  const bool held = OMNISTAGE_INVARIANT_HOLDS(1 + 1 == 3, about, "ended twice");
  OMNISTAGE_INVARIANT(2 + 2 == 5, "a binding without a request");
  const std::string err = testing::internal::GetCapturedStderr();
  SetInvariantMode(InvariantMode::kCrash);
  EXPECT_FALSE(held);
  EXPECT_EQ(InvariantViolations(), before + 2);
  EXPECT_TRUE(absl::StrContains(err, R"("level":"error")")) << err;
  EXPECT_TRUE(absl::StrContains(err, R"("request_id":"req-7","stage":1,"replica":0)")) << err;
  EXPECT_TRUE(absl::StrContains(err, "broken invariant at common/invariant_test.cc:")) << err;
  EXPECT_TRUE(absl::StrContains(err, "ended twice (1 + 1 == 3)")) << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 2) << err;
  EXPECT_TRUE(absl::StrContains(registry.Render(),
                                absl::StrCat("omnistage_invariant_violations_total ",
                                             before + 2, "\n")))
      << registry.Render();
}

}  // namespace
}  // namespace omnistage
