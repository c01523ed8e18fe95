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
  // Counts, outside the object, the calls that went through.
  int ran = 0;
  struct Owner {
    explicit Owner(int* counter) : ran(counter) {}
    int* ran;
    Liveness alive;
    std::function<void()> Callback() {
      return [ran = ran, alive = alive.watch()] {
        if (alive) ++*ran;
      };
    }
  };
  std::function<void()> late;
  {
    Owner owner(&ran);
    std::function<void()> callback = owner.Callback();
    callback();
    callback();
    late = owner.Callback();
  }
  EXPECT_EQ(ran, 2);
  late();
  EXPECT_EQ(ran, 2) << "a callback ran after its object was gone";
}

}  // namespace
}  // namespace omnistage
