#include "orchestrator/core/rate_limiter.h"

#include "common/retry_hint.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace omnistage {
namespace {

using ::testing::HasSubstr;

const absl::Time kStart = absl::FromUnixSeconds(1000);

Caller Limited(double per_second, double burst, double tokens_per_minute = 0,
               double token_burst = 0) {
  Caller caller;
  caller.identity = "alice";
  caller.rate_limits = {per_second, burst, tokens_per_minute, token_burst};
  return caller;
}

TEST(RateLimiterTest, ABurstThenTheRate) {
  RateLimiter limiter;
  const Caller alice = Limited(2, 3);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(limiter.Admit(alice, kStart).ok()) << i;
  const absl::Status refused = limiter.Admit(alice, kStart);
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(refused.message()),
              HasSubstr("the requests of 'alice' exceed the 2 per second (burst 3)"));
  EXPECT_EQ(RetryAfterOf(refused), absl::Milliseconds(500));
  // Half a second later one more may come, and not two.
  EXPECT_TRUE(limiter.Admit(alice, kStart + absl::Milliseconds(500)).ok());
  EXPECT_FALSE(limiter.Admit(alice, kStart + absl::Milliseconds(500)).ok());
  // Idle for long: the bucket holds at most its burst.
  const absl::Time later = kStart + absl::Minutes(1);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(limiter.Admit(alice, later).ok()) << i;
  EXPECT_FALSE(limiter.Admit(alice, later).ok());
}

TEST(RateLimiterTest, OutputTokensAreChargedAfterTheFact) {
  RateLimiter limiter;
  const Caller alice = Limited(0, 0, /*tokens_per_minute=*/600, /*token_burst=*/100);
  ASSERT_TRUE(limiter.Admit(alice, kStart).ok());
  limiter.ChargeOutput("alice", 150, kStart);  // 50 below empty: 5 s at 10/s.
  const absl::Status refused = limiter.Admit(alice, kStart);
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(refused.message()),
              HasSubstr("the output tokens of 'alice' exceed the 600 per minute"));
  EXPECT_EQ(RetryAfterOf(refused), absl::Seconds(5));
  EXPECT_FALSE(limiter.Admit(alice, kStart + absl::Seconds(4)).ok());
  EXPECT_TRUE(limiter.Admit(alice, kStart + absl::Seconds(5)).ok());
}

TEST(RateLimiterTest, IdentitiesAreApartAndTheUnlimitedAreFree) {
  RateLimiter limiter;
  Caller bob = Limited(1, 1);
  bob.identity = "bob";
  ASSERT_TRUE(limiter.Admit(Limited(1, 1), kStart).ok());
  EXPECT_TRUE(limiter.Admit(bob, kStart).ok());
  Caller free;
  free.identity = "carol";
  for (int i = 0; i < 100; ++i) EXPECT_TRUE(limiter.Admit(free, kStart).ok());
  limiter.ChargeOutput("carol", 1000000, kStart);
  EXPECT_TRUE(limiter.Admit(free, kStart).ok());
  Caller anonymous = Limited(1, 1);
  anonymous.identity = "";
  ASSERT_TRUE(limiter.Admit(anonymous, kStart).ok());
  EXPECT_THAT(std::string(limiter.Admit(anonymous, kStart).message()),
              HasSubstr("the requests of the unauthenticated clients exceed"));
}

}  // namespace
}  // namespace omnistage
