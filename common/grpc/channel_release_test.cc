#include "common/grpc/channel_release.h"

#include <memory>

#include "absl/time/time.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"

namespace omnistage {
namespace {

std::shared_ptr<grpc::Channel> NewChannel() {
  return grpc::CreateChannel("127.0.0.1:1", grpc::InsecureChannelCredentials());
}

// A channel handed over is kept through its grace, and let go by the first
// hand-over after it.
TEST(ChannelReleaseTest, KeepsAChannelThroughItsGraceAndNoLonger) {
  std::shared_ptr<grpc::Channel> kept = NewChannel();
  std::weak_ptr<grpc::Channel> kept_seen = kept;
  ReleaseChannelLater(std::move(kept), absl::Hours(1));
  ReleaseChannelLater(nullptr);
  EXPECT_FALSE(kept_seen.expired());

  std::shared_ptr<grpc::Channel> due = NewChannel();
  std::weak_ptr<grpc::Channel> due_seen = due;
  ReleaseChannelLater(std::move(due), absl::ZeroDuration());
  EXPECT_FALSE(due_seen.expired());  // Nothing came after it yet.
  ReleaseChannelLater(nullptr);
  EXPECT_TRUE(due_seen.expired());
  EXPECT_FALSE(kept_seen.expired());
}

// While the owner still holds the channel, handing it over changes nothing
// for the owner.
TEST(ChannelReleaseTest, AChannelStillSharedStaysUsable) {
  std::shared_ptr<grpc::Channel> channel = NewChannel();
  ReleaseChannelLater(channel, absl::ZeroDuration());
  ReleaseChannelLater(nullptr);
  ASSERT_NE(channel, nullptr);
  EXPECT_EQ(channel.use_count(), 1);  // The graveyard let go of its share.
}

}  // namespace
}  // namespace omnistage
