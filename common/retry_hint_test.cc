#include "common/retry_hint.h"

#include "gtest/gtest.h"

namespace omnistage {
namespace {

TEST(RetryHintTest, RidesOnTheStatusRoundedUpToMilliseconds) {
  const absl::Status status =
      WithRetryAfter(absl::ResourceExhaustedError("full"), absl::Microseconds(1500));
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(status.message(), "full");
  EXPECT_EQ(RetryAfterOf(status), absl::Milliseconds(2));
  EXPECT_EQ(RetryAfterOf(WithRetryAfter(absl::UnavailableError("x"), absl::ZeroDuration())),
            absl::Milliseconds(1));
}

TEST(RetryHintTest, RetryLaterSaysWhenInTheMessageToo) {
  const absl::Status status =
      RetryLater(absl::StatusCode::kResourceExhausted, "the queue is full", absl::Seconds(1));
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(status.message(), "the queue is full; retry after 1000 ms");
  EXPECT_EQ(RetryAfterOf(status), absl::Seconds(1));
}

TEST(RetryHintTest, NoneUnlessGiven) {
  EXPECT_EQ(RetryAfterOf(absl::ResourceExhaustedError("full")), std::nullopt);
  EXPECT_EQ(RetryAfterOf(absl::OkStatus()), std::nullopt);
}

}  // namespace
}  // namespace omnistage
