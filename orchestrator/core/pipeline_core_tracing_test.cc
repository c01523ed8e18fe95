// Tests for the orchestrator's spans (request_tracing.h, docs/observability.md,
// "Traces"): one tree per request under the client's span, a span per stage
// whose context its worker gets, the admission queue's wait, and what
// happened as events: first outputs, a failover, an abort, a cancel; a
// refusal and a failure as errors. Fakes only; the spans are read from what
// the exporter sends.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "common/tracing/testing/keeping_transport.h"
#include "common/tracing/testing/span_fields.h"
#include "orchestrator/core/pipeline_core.h"
#include "orchestrator/core/testing/pipeline_core_harness.h"

namespace omnistage {
namespace pipeline_core_test {
namespace {

using ::testing::ElementsAre;
using ::testing::UnorderedElementsAre;

constexpr char kClientSpan[] = "00f067aa0ba902b7";
constexpr char kTraceparent[] = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

std::string Hex(const std::string& bytes) { return absl::BytesToHexString(bytes); }

class PipelineCoreTracingTest : public PipelineCoreTest {
 protected:
  void Trace() {
    traced_ = std::make_unique<KeepingTracer>();
    core().set_tracer(&traced_->tracer());
  }

  std::shared_ptr<FakeResponseSink> GenTraced(const std::string& id,
                                              const std::string& traceparent = kTraceparent) {
    auto sink = std::make_shared<FakeResponseSink>();
    sinks_.push_back(sink);
    v1::GenerateRequest request;
    request.set_request_id(id);
    request.set_prompt("Hi there");
    core().Generate(std::move(request), sink, traceparent, Caller::Of("alice"));
    return sink;
  }

  // Every span exported, by name (the last of a name wins).
  std::map<std::string, SpanProto> Spans() {
    std::map<std::string, SpanProto> by_name;
    for (const SpanProto& span : traced_->Flush()) by_name[span.name()] = span;
    return by_name;
  }

  std::unique_ptr<KeepingTracer> traced_;
};

TEST_F(PipelineCoreTracingTest, ARequestIsOneTreeUnderTheClientsSpan) {
  Build();
  Trace();
  auto sink = GenTraced("r1");
  Out(0, 0, "r1", {Text("Hello")});
  Out(0, 0, "r1", {Text("!")}, true);
  Out(1, 0, "r1", {Codes({1, 2})}, true);
  Done(2, 0, "r1", {Audio("pcm")});
  ASSERT_EQ(sink->terminal().finish_reason(), v1::FINISH_REASON_STOP);

  std::map<std::string, SpanProto> spans = Spans();
  ASSERT_EQ(spans.size(), 4u);
  const SpanProto& generate = spans["Generate"];
  EXPECT_EQ(Hex(generate.trace_id()), "4bf92f3577b34da6a3ce929d0e0e4736");
  EXPECT_EQ(Hex(generate.parent_span_id()), kClientSpan);
  EXPECT_EQ(generate.kind(), SpanProto::SPAN_KIND_SERVER);
  EXPECT_EQ(AttributeOf(generate, "rpc.method"), "Generate");
  EXPECT_EQ(AttributeOf(generate, "omnistage.request_id"), "r1");
  EXPECT_EQ(AttributeOf(generate, "omnistage.identity"), "alice");
  EXPECT_EQ(AttributeOf(generate, "gen_ai.response.finish_reasons"), "stop");
  EXPECT_EQ(generate.status().code(), opentelemetry::proto::trace::v1::Status::STATUS_CODE_UNSET);
  int stage_id = 0;
  for (const char* stage : {"thinker", "talker", "vocoder"}) {
    const SpanProto& span = spans[absl::StrCat("stage ", stage)];
    EXPECT_EQ(span.trace_id(), generate.trace_id()) << stage;
    EXPECT_EQ(span.parent_span_id(), generate.span_id()) << stage;
    EXPECT_EQ(span.kind(), SpanProto::SPAN_KIND_CLIENT) << stage;
    EXPECT_EQ(AttributeOf(span, "omnistage.stage"), stage);
    EXPECT_EQ(AttributeOf(span, "omnistage.replica"), "0");
    EXPECT_EQ(AttributeOf(span, "omnistage.instance_id"), absl::StrCat(Prefix(stage_id), "0#1"));
    // The stages after the first were handed their input whole, then spoke.
    if (stage_id == 0) {
      EXPECT_THAT(EventNamesOf(span), ElementsAre("first_output")) << stage;
    } else {
      EXPECT_THAT(EventNamesOf(span), ElementsAre("input_complete", "first_output")) << stage;
    }
    EXPECT_LE(span.end_time_unix_nano(), generate.end_time_unix_nano());
    // Its worker was sent its context: the worker's span is its child.
    ASSERT_EQ(fake(stage_id, 0).adds().size(), 1u);
    std::optional<TraceContext> sent =
        TraceContext::Parse(fake(stage_id, 0).adds()[0].traceparent());
    ASSERT_TRUE(sent.has_value()) << stage;
    EXPECT_EQ(sent->span_id, span.span_id()) << stage;
    EXPECT_TRUE(sent->sampled());
    ++stage_id;
  }
}

// Without a traceparent the request starts a trace of its own; with an
// unsampled one nothing is recorded, and the workers hear the decision.
TEST_F(PipelineCoreTracingTest, NoParentStartsATraceAndAnUnsampledParentRecordsNothing) {
  Build();
  Trace();
  GenTraced("r1", "");
  Done(0, 0, "r1", {Text("Hi")});
  Done(1, 0, "r1", {Codes({1})});
  Done(2, 0, "r1", {Audio("pcm")});
  GenTraced("r2", "00-4bf92f3577b34da6a3ce929d0e0e4737-00f067aa0ba902b7-00");
  Done(0, 0, "r2", {Text("Hi")});
  std::optional<TraceContext> sent = TraceContext::Parse(fake(0, 0).adds()[1].traceparent());
  ASSERT_TRUE(sent.has_value());
  EXPECT_FALSE(sent->sampled());
  EXPECT_EQ(Hex(sent->trace_id), "4bf92f3577b34da6a3ce929d0e0e4737");
  Done(1, 0, "r2", {Codes({1})});
  Done(2, 0, "r2", {Audio("pcm")});

  std::vector<SpanProto> all = traced_->Flush();
  ASSERT_EQ(all.size(), 4u);  // r1's only.
  for (const SpanProto& span : all) {
    if (span.name() == "Generate") {
      EXPECT_EQ(span.parent_span_id(), "");
    }
    EXPECT_NE(Hex(span.trace_id()), "4bf92f3577b34da6a3ce929d0e0e4737");
  }
}

TEST_F(PipelineCoreTracingTest, AFailoverIsAnEventOfItsStageAndTheNewReplicaGetsItsContext) {
  PipelineConfig config = OmniConfig(Shape().Talkers(2));
  config.stages[1].failover_max_attempts = 2;
  Build(std::move(config));
  Trace();
  GenTraced("r1");
  Out(0, 0, "r1", {Text("Hello")}, true);
  core().OnReplicaDown(1, 0, absl::UnavailableError("connection reset"));
  ASSERT_EQ(fake(1, 1).adds().size(), 1u);
  EXPECT_EQ(fake(1, 1).adds()[0].traceparent(), fake(1, 0).adds()[0].traceparent());
  Out(1, 1, "r1", {Codes({1})}, true);
  Done(2, 0, "r1", {Audio("pcm")});

  std::map<std::string, SpanProto> spans = Spans();
  const SpanProto& talker = spans["stage talker"];
  EXPECT_THAT(EventNamesOf(talker), ElementsAre("input_complete", "failover", "first_output"));
  EXPECT_THAT(talker.events(1).attributes(0).value().string_value(),
              ::testing::HasSubstr("replica 0 -> 1: "));
  EXPECT_EQ(AttributeOf(talker, "omnistage.replica"), "1");
  EXPECT_EQ(AttributeOf(spans["Generate"], "gen_ai.response.finish_reasons"), "stop");
}

TEST_F(PipelineCoreTracingTest, AnAbortAndACancelAreWhatTheyWere) {
  Build();
  Trace();
  GenTraced("r1");
  Out(0, 0, "r1", {Text("Hel")});
  ASSERT_TRUE(AbortNow({"r1"}, "alice").ok());
  std::map<std::string, SpanProto> spans = Spans();
  const SpanProto& generate = spans["Generate"];
  EXPECT_THAT(EventNamesOf(generate), ElementsAre("abort_requested"));
  EXPECT_EQ(AttributeOf(generate, "gen_ai.response.finish_reasons"), "abort");
  // The stage it ran on ended with it.
  EXPECT_GT(spans["stage thinker"].end_time_unix_nano(), 0u);

  Build();
  Trace();
  auto sink = GenTraced("r2");
  core().Cancel("r2", sink.get());
  spans = Spans();
  EXPECT_THAT(EventNamesOf(spans["Generate"]), ElementsAre("cancelled"));
}

TEST_F(PipelineCoreTracingTest, AFailureAndARefusalAreErrors) {
  Build();
  Trace();
  GenTraced("r1");
  Out(0, 0, "r1", {Text("Hel")});
  core().OnReplicaDown(0, 0, absl::UnavailableError("killed"));
  GenTraced("r2");  // The thinker has no live replica left.
  std::vector<SpanProto> all = traced_->Flush();
  std::vector<std::string> errors;
  for (const SpanProto& span : all) {
    if (span.status().code() == opentelemetry::proto::trace::v1::Status::STATUS_CODE_ERROR) {
      errors.push_back(span.name());
    }
  }
  // r1's Generate and the stages it ran on; r2's Generate and the send to
  // the thinker that found no replica.
  EXPECT_THAT(errors, UnorderedElementsAre("stage thinker", "stage talker", "Generate",
                                           "stage thinker", "Generate"));
}

TEST_F(PipelineCoreTracingTest, AWaitInTheAdmissionQueueIsASpan) {
  PipelineConfig config;
  config.name = "one-stage";
  config.stages.push_back(
      Stage(0, "thinker", v1::MODALITY_TEXT, true, InputMode::kOnFinish, /*replicas=*/1));
  config.max_in_flight = 1000;
  config.max_queued = 100;
  config.max_queue_wait = absl::Seconds(30);
  config.admission_headroom = 2;
  config.request_idle_timeout = absl::ZeroDuration();
  Build(config);
  Trace();
  // More than the replica's 8 slots and the 2 of headroom.
  constexpr int kRequests = 14;
  for (int i = 0; i < kRequests; ++i) GenTraced(absl::StrCat("r", i));
  for (int i = 0; i < kRequests; ++i) Done(0, 0, absl::StrCat("r", i), {Text("x")});
  std::vector<SpanProto> all = traced_->Flush();
  std::map<std::string, std::string> generate_of;  // span id -> request id
  for (const SpanProto& span : all) {
    if (span.name() == "Generate")
      generate_of[span.span_id()] = AttributeOf(span, "omnistage.request_id");
  }
  int queued = 0;
  for (const SpanProto& span : all) {
    if (span.name() != "admission queue") continue;
    ++queued;
    EXPECT_EQ(generate_of.count(span.parent_span_id()), 1u);
    EXPECT_LE(span.start_time_unix_nano(), span.end_time_unix_nano());
  }
  EXPECT_GT(queued, 0);
  EXPECT_LT(queued, kRequests);
}

}  // namespace
}  // namespace pipeline_core_test
}  // namespace omnistage
