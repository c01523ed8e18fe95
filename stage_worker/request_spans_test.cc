#include "stage_worker/request_spans.h"

#include <map>
#include <vector>

#include "absl/strings/escaping.h"
#include "common/tracing/testing/keeping_transport.h"
#include "common/tracing/testing/span_fields.h"
#include "gtest/gtest.h"

namespace omnistage {
namespace {

constexpr char kStageSpan[] = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

v1::RequestOutput Output(const std::string& id, bool payload, bool finished,
                         v1::FinishReason reason = v1::FINISH_REASON_STOP) {
  v1::RequestOutput output;
  output.set_request_id(id);
  if (payload) output.add_payloads()->mutable_text()->set_text("x");
  output.set_finished(finished);
  if (finished) output.set_finish_reason(reason);
  return output;
}

class RequestSpansTest : public ::testing::Test {
 protected:
  // Spans by request id.
  std::map<std::string, SpanProto> Ended() {
    std::map<std::string, SpanProto> by_id;
    for (const SpanProto& span : traced_.Flush()) {
      by_id[AttributeOf(span, "omnistage.request_id")] = span;
    }
    return by_id;
  }

  KeepingTracer traced_;
};

TEST_F(RequestSpansTest, ARequestsLifeInTheLoopIsOneSpanUnderTheStages) {
  RequestSpans spans(&traced_.tracer(), {1, "talker-1", "sim_talker"});
  spans.Added(7, "r1", kStageSpan);
  spans.Taken(7, "r1");
  spans.Output(7, Output("r1", false, false));  // A step without output for it.
  spans.Output(7, Output("r1", true, false));
  spans.Output(7, Output("r1", true, false));
  spans.Output(7, Output("r1", true, true));
  std::map<std::string, SpanProto> ended = Ended();
  ASSERT_EQ(ended.size(), 1u);
  const SpanProto& span = ended["r1"];
  EXPECT_EQ(span.name(), "engine");
  EXPECT_EQ(span.kind(), SpanProto::SPAN_KIND_SERVER);
  EXPECT_EQ(absl::BytesToHexString(span.parent_span_id()), "00f067aa0ba902b7");
  EXPECT_EQ(absl::BytesToHexString(span.trace_id()), "4bf92f3577b34da6a3ce929d0e0e4736");
  EXPECT_EQ(EventNamesOf(span), (std::vector<std::string>{"taken", "first_output"}));
  EXPECT_EQ(AttributeOf(span, "omnistage.steps"), "4");
  EXPECT_EQ(AttributeOf(span, "omnistage.stage_id"), "1");
  EXPECT_EQ(AttributeOf(span, "omnistage.instance_id"), "talker-1");
  EXPECT_EQ(AttributeOf(span, "omnistage.engine"), "sim_talker");
  EXPECT_EQ(AttributeOf(span, "omnistage.session"), "7");
  EXPECT_EQ(AttributeOf(span, "gen_ai.response.finish_reasons"), "stop");
}

TEST_F(RequestSpansTest, AbortsFailuresAndClosedSessionsEndTheirSpans) {
  RequestSpans spans(&traced_.tracer(), {0, "thinker-0", "sim_llm"});
  spans.Added(1, "aborted", kStageSpan);
  spans.Added(1, "failed", kStageSpan);
  spans.Added(1, "left", kStageSpan);
  spans.Added(2, "other-session", kStageSpan);
  spans.Ended(1, "aborted", v1::FINISH_REASON_ABORT, "");
  v1::RequestOutput failure = Output("failed", false, true, v1::FINISH_REASON_ERROR);
  failure.mutable_error()->set_message("engine blew up");
  spans.Output(1, failure);
  spans.SessionClosed(1);
  // Session 2's request still runs; unknown ids are ignored.
  spans.Ended(1, "never-added", v1::FINISH_REASON_ABORT, "");
  std::map<std::string, SpanProto> ended = Ended();
  ASSERT_EQ(ended.size(), 3u);
  EXPECT_EQ(EventNamesOf(ended["aborted"]), std::vector<std::string>{"aborted"});
  EXPECT_EQ(AttributeOf(ended["aborted"], "gen_ai.response.finish_reasons"), "abort");
  EXPECT_EQ(ended["failed"].status().code(),
            opentelemetry::proto::trace::v1::Status::STATUS_CODE_ERROR);
  EXPECT_EQ(ended["failed"].status().message(), "engine blew up");
  EXPECT_EQ(EventNamesOf(ended["left"]), std::vector<std::string>{"aborted"});
  EXPECT_EQ(ended.count("other-session"), 0u);
}

TEST(RequestSpansOffTest, OffRecordsNothing) {
  RequestSpans spans(nullptr, {0, "x", "sim_llm"});
  EXPECT_FALSE(spans.enabled());
  spans.Added(1, "r1", kStageSpan);
  spans.Output(1, Output("r1", true, true));
  Tracer off;
  RequestSpans also(&off, {0, "x", "sim_llm"});
  EXPECT_FALSE(also.enabled());
}

}  // namespace
}  // namespace omnistage
