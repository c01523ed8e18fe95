#include "common/tracing/trace_context.h"

#include "gtest/gtest.h"

namespace omnistage {
namespace {

constexpr char kParent[] = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

TEST(TraceContextTest, ReadsATraceparentAndWritesItBack) {
  std::optional<TraceContext> context = TraceContext::Parse(kParent, "congo=t61rcWkgMzE");
  ASSERT_TRUE(context.has_value());
  EXPECT_EQ(context->trace_id.size(), 16u);
  EXPECT_EQ(context->span_id.size(), 8u);
  EXPECT_TRUE(context->sampled());
  EXPECT_EQ(context->trace_state, "congo=t61rcWkgMzE");
  EXPECT_EQ(context->TraceIdHex(), "4bf92f3577b34da6a3ce929d0e0e4736");
  EXPECT_EQ(context->Traceparent(), kParent);
}

TEST(TraceContextTest, AChildKeepsTheTraceWithANewSpan) {
  const TraceContext parent = *TraceContext::Parse(kParent);
  const TraceContext child = parent.Child();
  EXPECT_EQ(child.trace_id, parent.trace_id);
  EXPECT_EQ(child.flags, parent.flags);
  EXPECT_NE(child.span_id, parent.span_id);
  EXPECT_EQ(child.span_id.size(), 8u);
}

TEST(TraceContextTest, ANewRootHasValidIds) {
  const TraceContext root = TraceContext::NewRoot(0);
  EXPECT_FALSE(root.sampled());
  std::optional<TraceContext> again = TraceContext::Parse(root.Traceparent());
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->trace_id, root.trace_id);
  EXPECT_EQ(again->span_id, root.span_id);
  EXPECT_NE(TraceContext::NewRoot(1).trace_id, root.trace_id);
}

TEST(TraceContextTest, MalformedOnesAreIgnored) {
  for (const char* bad : {
           "",
           "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
           "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",    // upper case
           "00-00000000000000000000000000000000-00f067aa0ba902b7-01",    // zero trace
           "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",    // zero span
           "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",    // version ff
           "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x",  // 00 is 55 long
           "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
       }) {
    EXPECT_EQ(TraceContext::Parse(bad), std::nullopt) << bad;
  }
  // A later version may carry more after a dash.
  EXPECT_TRUE(TraceContext::Parse("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-later")
                  .has_value());
}

TEST(TraceContextTest, TraceIdOfAW3cTraceparent) {
  EXPECT_EQ(TraceIdOf("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
            "4bf92f3577b34da6a3ce929d0e0e4736");
  EXPECT_EQ(TraceIdOf("00-00000000000000000000000000000000-00f067aa0ba902b7-01"), "");
  EXPECT_EQ(TraceIdOf("00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01"), "");
  EXPECT_EQ(TraceIdOf("garbage"), "");
}

TEST(TraceContextTest, ATooLongTracestateIsDropped) {
  const std::string state(TraceContext::kMaxTraceState + 1, 'a');
  std::optional<TraceContext> context = TraceContext::Parse(kParent, state);
  ASSERT_TRUE(context.has_value());
  EXPECT_EQ(context->trace_state, "");
}

TEST(TraceContextTest, ATracestateWithBytesOutsidePrintableAsciiIsDropped) {
  EXPECT_EQ(TraceContext::Parse(kParent, "a=1, b=2")->trace_state, "a=1, b=2");
  EXPECT_EQ(TraceContext::Parse(kParent, "a=\x01")->trace_state, "");
  EXPECT_EQ(TraceContext::Parse(kParent, "a=1\nb=2")->trace_state, "");
  EXPECT_EQ(TraceContext::Parse(kParent, "a=caf\xc3\xa9")->trace_state, "");
}

}  // namespace
}  // namespace omnistage
