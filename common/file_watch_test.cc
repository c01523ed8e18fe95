#include "common/file_watch.h"

#include <stdio.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace omnistage {
namespace {

class FileWatchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* tmp = std::getenv("TEST_TMPDIR");
    dir_ = std::string(tmp != nullptr ? tmp : "/tmp");
    a_ = dir_ + "/a.pem";
    b_ = dir_ + "/b.pem";
    Write(a_, "one");
    Write(b_, "two");
  }
  static void Write(const std::string& path, const std::string& text) {
    std::ofstream(path, std::ios::trunc) << text;
  }

  std::string dir_, a_, b_;
};

TEST_F(FileWatchTest, FirstLookIsAChangeThenOnlyRealChanges) {
  FileWatch watch({a_, b_}, absl::ZeroDuration());
  EXPECT_TRUE(watch.Changed());
  EXPECT_FALSE(watch.Changed());
  Write(b_, "two, longer");  // Edited in place: another size.
  EXPECT_TRUE(watch.Changed());
  EXPECT_FALSE(watch.Changed());
}

TEST_F(FileWatchTest, SeesAFileSwappedForAnotherOfTheSameSize) {
  FileWatch watch({a_}, absl::ZeroDuration());
  ASSERT_TRUE(watch.Changed());
  // As Kubernetes updates a Secret: a new file renamed over the old (another
  // inode), same size, possibly the same modification time.
  const std::string fresh = dir_ + "/a.pem.new";
  Write(fresh, "uno");
  ASSERT_EQ(rename(fresh.c_str(), a_.c_str()), 0);
  EXPECT_TRUE(watch.Changed());
}

TEST_F(FileWatchTest, DisappearingAndReturningAreChanges) {
  FileWatch watch({a_}, absl::ZeroDuration());
  ASSERT_TRUE(watch.Changed());
  ASSERT_EQ(unlink(a_.c_str()), 0);
  EXPECT_TRUE(watch.Changed());
  EXPECT_FALSE(watch.Changed());  // Still gone: no news.
  Write(a_, "one");
  EXPECT_TRUE(watch.Changed());
}

TEST_F(FileWatchTest, LooksAtMostOncePerInterval) {
  FileWatch watch({a_}, absl::Hours(1));
  ASSERT_TRUE(watch.Changed());
  Write(a_, "changed, not yet seen");
  EXPECT_FALSE(watch.Changed());
  watch.set_interval(absl::ZeroDuration());
  EXPECT_TRUE(watch.Changed());
}

}  // namespace
}  // namespace omnistage
