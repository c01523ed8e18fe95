#include "common/invariant.h"

#include "gtest/gtest.h"

namespace omnistage {
namespace {

TEST(InvariantTest, HoldingInvariantDoesNothing) {
  OMNISTAGE_INVARIANT(1 + 1 == 2, "arithmetic");
  EXPECT_EQ(InvariantViolations(), 0u);
}

#ifndef NDEBUG
TEST(InvariantDeathTest, BrokenInvariantCrashesDebugBuildsNamingIt) {
  EXPECT_DEATH(OMNISTAGE_INVARIANT(1 + 1 == 3, "a request ended twice"),
               "broken invariant at .*invariant_test.cc:[0-9]+: a request ended twice");
}
#else
TEST(InvariantTest, BrokenInvariantIsCountedInOptimizedBuilds) {
  OMNISTAGE_INVARIANT(1 + 1 == 3, "a request ended twice");
  EXPECT_EQ(InvariantViolations(), 1u);
}
#endif

}  // namespace
}  // namespace omnistage
