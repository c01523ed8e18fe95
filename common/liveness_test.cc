#include "common/liveness.h"

#include <functional>
#include <memory>

#include "gtest/gtest.h"

namespace omnistage {
namespace {

TEST(LivenessTest, AWatchIsTrueWhileItsObjectLives) {
  auto alive = std::make_unique<Liveness>();
  Liveness::Watch watch = alive->watch();
  EXPECT_TRUE(watch);
  alive.reset();
  EXPECT_FALSE(watch);
}

TEST(LivenessTest, EndTurnsEveryWatchFalseAtOnce) {
  Liveness alive;
  Liveness::Watch first = alive.watch();
  Liveness::Watch second = alive.watch();
  alive.End();
  EXPECT_FALSE(first);
  EXPECT_FALSE(second);
  EXPECT_FALSE(alive.watch());  // Watches taken after the end see it too.
}

TEST(LivenessTest, ADefaultWatchWatchesNothing) { EXPECT_FALSE(Liveness::Watch()); }

// The use it is made for: a callback that outlives its object does nothing.
TEST(LivenessTest, ACallbackAfterItsObjectEndedDoesNothing) {
  struct Counter {
    int ticks = 0;
    Liveness alive;
    std::function<void()> Callback() {
      return [this, alive = alive.watch()] {
        if (alive) ++ticks;
      };
    }
  };
  int seen = 0;
  std::function<void()> late;
  {
    Counter counter;
    std::function<void()> callback = counter.Callback();
    callback();
    callback();
    seen = counter.ticks;
    late = counter.Callback();
  }
  late();  // Would write to freed memory without the check (ASan says so).
  EXPECT_EQ(seen, 2);
}

}  // namespace
}  // namespace omnistage
