#include "orchestrator/core/request_id.h"

#include "gtest/gtest.h"

namespace omnistage {
namespace {

TEST(RequestIdTest, GeneratedIdsNameTheirNode) {
  const std::string node = NewNodeId();
  EXPECT_TRUE(IsNodeId(node));
  const std::string id = GeneratedRequestId(node);
  EXPECT_EQ(id.size(), 4 + 32 + 1 + 12);
  EXPECT_EQ(OwnerNodeOf(id), node);
  EXPECT_NE(GeneratedRequestId(node), id);
  EXPECT_NE(NewNodeId(), node);
}

TEST(RequestIdTest, UntaggedAndClientIdsHaveNoOwner) {
  const std::string untagged = GeneratedRequestId("");
  EXPECT_EQ(untagged.size(), 4 + 32);
  EXPECT_FALSE(OwnerNodeOf(untagged).has_value());
  EXPECT_FALSE(OwnerNodeOf("my-request-7").has_value());
  EXPECT_FALSE(OwnerNodeOf("").has_value());
  const std::string hex32(32, 'a');
  // One character off the form is a client's id.
  EXPECT_FALSE(OwnerNodeOf("req-" + hex32 + ".a1b2c3d4e5f").has_value());
  EXPECT_FALSE(OwnerNodeOf("req-" + hex32 + ":a1b2c3d4e5f6").has_value());
  EXPECT_FALSE(OwnerNodeOf("req-" + hex32 + ".A1B2C3D4E5F6").has_value());
  EXPECT_FALSE(OwnerNodeOf("Req-" + hex32 + ".a1b2c3d4e5f6").has_value());
  EXPECT_EQ(OwnerNodeOf("req-" + hex32 + ".a1b2c3d4e5f6"), "a1b2c3d4e5f6");
  EXPECT_FALSE(IsNodeId("a1b2c3d4e5f"));
  EXPECT_FALSE(IsNodeId("g1b2c3d4e5f6"));
}

}  // namespace
}  // namespace omnistage
