#include "common/production_stamp.h"

#include "gtest/gtest.h"

namespace omnistage {
namespace {

TEST(ProductionStampTest, RoundTripsAndRecognizesOnlyStamps) {
  const int64_t now = MonotonicNowNs();
  EXPECT_GT(now, 0);
  EXPECT_EQ(StampOf(StampPayload(now)), now);
  EXPECT_EQ(StampOf(StampPayload(0x0102030405060708)), 0x0102030405060708);
  v1::Payload other;
  other.set_raw("12345678");
  EXPECT_FALSE(StampOf(other).has_value());
  other.mutable_tokens()->add_ids(1);
  EXPECT_FALSE(StampOf(other).has_value());
  EXPECT_GE(MonotonicNowNs(), now);
}

}  // namespace
}  // namespace omnistage
