#include "common/revocable.h"

#include <thread>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace omnistage {
namespace {

TEST(RevocableTest, RunsUntilRevokedThenNothing) {
  int target = 1;
  Revocable<int> ref(&target);
  EXPECT_TRUE(ref.With([](int& t) { t = 2; }));
  EXPECT_EQ(target, 2);
  EXPECT_FALSE(ref.revoked());
  ref.Revoke();
  EXPECT_TRUE(ref.revoked());
  EXPECT_FALSE(ref.With([](int& t) { t = 3; }));
  EXPECT_EQ(target, 2);
  ref.Revoke();  // Idempotent.
}

TEST(RevocableTest, CallsNest) {
  int target = 0;
  Revocable<int> ref(&target);
  EXPECT_TRUE(ref.With([&](int& outer) {
    EXPECT_TRUE(ref.With([](int& inner) { ++inner; }));
    ++outer;
  }));
  EXPECT_EQ(target, 2);
}

// The owner's Revoke() returns only once a call running on another thread
// has returned; a call nested in it after the revocation runs nothing.
TEST(RevocableTest, RevokeWaitsForTheRunningCall) {
  int target = 0;
  Revocable<int> ref(&target);
  absl::Notification entered, release, revoked;
  bool nested_ran = true;
  std::thread user([&] {
    ref.With([&](int& t) {
      entered.Notify();
      release.WaitForNotification();
      nested_ran = ref.With([](int&) {});
      t = 1;
    });
  });
  entered.WaitForNotification();
  std::thread owner([&] {
    ref.Revoke();
    revoked.Notify();
  });
  // Revoke() is waiting: it cannot return while the call runs.
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (!ref.revoked() && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(1));
  EXPECT_TRUE(ref.revoked());
  EXPECT_FALSE(revoked.WaitForNotificationWithTimeout(absl::Milliseconds(50)));
  release.Notify();
  EXPECT_TRUE(revoked.WaitForNotificationWithTimeout(absl::Seconds(10)));
  owner.join();
  user.join();
  EXPECT_EQ(target, 1);
  EXPECT_FALSE(nested_ran);
}

}  // namespace
}  // namespace omnistage
