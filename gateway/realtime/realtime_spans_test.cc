// A Realtime session's spans (realtime_spans.h): the session span under the
// upgrade's context, each response's span under it, the headers each call
// carries, and with tracing off the upgrade's own headers for every call.
#include "gateway/realtime/realtime_spans.h"

#include <map>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "common/tracing/testing/keeping_transport.h"
#include "common/tracing/testing/span_fields.h"
#include "common/tracing/trace_context.h"
#include "gtest/gtest.h"

namespace omnistage {
namespace {

constexpr char kUpgrade[] = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

TEST(RealtimeSpansTest, ResponsesAreChildrenOfTheSessionUnderTheUpgrade) {
  KeepingTracer traced;
  std::string session_parent, first_parent;
  {
    RealtimeSpans spans(&traced.tracer(), {kUpgrade, "vendor=opaque"}, "sess_1");
    const TraceHeaders session = spans.Session();
    EXPECT_EQ(session.tracestate, "vendor=opaque");
    spans.ResponseBegan("resp_1");
    const TraceHeaders first = spans.Response();
    EXPECT_NE(first.traceparent, session.traceparent);
    spans.ResponseEnded("completed", "");
    spans.ResponseBegan("resp_2");
    spans.ResponseEnded("failed", "the thinker stage failed");
    // After a response, a call carries the session's context again.
    EXPECT_EQ(spans.Response().traceparent, session.traceparent);
    spans.ResponseBegan("resp_3");  // Still running as the session goes.
    spans.Close();
    session_parent = TraceContext::Parse(session.traceparent)->span_id;
    first_parent = TraceContext::Parse(first.traceparent)->span_id;
  }
  std::map<std::string, SpanProto> by_id;
  std::vector<SpanProto> responses;
  for (const SpanProto& span : traced.Flush()) {
    by_id[span.span_id()] = span;
    if (span.name() == "realtime response") responses.push_back(span);
  }
  ASSERT_EQ(by_id.size(), 4u);
  const SpanProto& session = by_id[session_parent];
  EXPECT_EQ(session.name(), "realtime session");
  EXPECT_EQ(absl::BytesToHexString(session.trace_id()), "4bf92f3577b34da6a3ce929d0e0e4736");
  EXPECT_EQ(absl::BytesToHexString(session.parent_span_id()), "00f067aa0ba902b7");
  EXPECT_EQ(session.trace_state(), "vendor=opaque");
  EXPECT_EQ(AttributeOf(session, "omnistage.realtime.session_id"), "sess_1");
  ASSERT_EQ(responses.size(), 3u);
  std::map<std::string, std::string> status;  // response id -> status
  for (const SpanProto& response : responses) {
    EXPECT_EQ(response.parent_span_id(), session_parent);
    status[AttributeOf(response, "omnistage.realtime.response_id")] =
        AttributeOf(response, "omnistage.realtime.status");
  }
  EXPECT_EQ(by_id[first_parent].name(), "realtime response");
  EXPECT_EQ(status["resp_1"], "completed");
  EXPECT_EQ(status["resp_2"], "failed");
  EXPECT_EQ(status["resp_3"], "cancelled");
  for (const SpanProto& response : responses) {
    if (AttributeOf(response, "omnistage.realtime.response_id") == "resp_2") {
      EXPECT_EQ(response.status().code(),
                opentelemetry::proto::trace::v1::Status::STATUS_CODE_ERROR);
      EXPECT_EQ(response.status().message(), "the thinker stage failed");
    }
  }
}

TEST(RealtimeSpansTest, WithTracingOffEveryCallCarriesTheUpgradesHeaders) {
  RealtimeSpans spans(nullptr, {kUpgrade, "a=1"}, "sess_2");
  EXPECT_EQ(spans.Session().traceparent, kUpgrade);
  spans.ResponseBegan("resp_1");
  EXPECT_EQ(spans.Response().traceparent, kUpgrade);
  EXPECT_EQ(spans.Response().tracestate, "a=1");
  spans.ResponseEnded("completed", "");
  spans.Close();
}

}  // namespace
}  // namespace omnistage
