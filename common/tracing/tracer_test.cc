#include "common/tracing/tracer.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/notification.h"
#include "common/tracing/testing/keeping_transport.h"
#include "gtest/gtest.h"

namespace omnistage {
namespace {

class TracerTest : public ::testing::Test {
 protected:
  Tracer& MakeTracer(const char* sampler, const char* arg = "") {
    traced_ = std::make_unique<KeepingTracer>(sampler, arg);
    return traced_->tracer();
  }
  std::vector<SpanProto> Kept(Tracer&) { return traced_->Flush(); }

  std::unique_ptr<KeepingTracer> traced_;
};

const absl::Time kStart = absl::FromUnixSeconds(1700000000);

TEST_F(TracerTest, ASpanRecordsWhatHappenedUnderItsParent) {
  Tracer& tracer = MakeTracer("");
  const TraceContext caller =
      *TraceContext::Parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "k=v");
  Span span = tracer.Start("Generate", Span::Kind::kServer, &caller, kStart);
  ASSERT_TRUE(span.recording());
  EXPECT_EQ(span.context().trace_id, caller.trace_id);
  EXPECT_NE(span.context().span_id, caller.span_id);
  span.Set("omnistage.identity", "alice");
  span.Set("gen_ai.usage.output_tokens", 12);
  span.Set("omnistage.cached", true);
  span.Set("omnistage.wait_seconds", 0.25);
  span.Event("first_output", kStart + absl::Milliseconds(40), "stage", "thinker");
  span.Error("stage 1 failed");
  Span child = tracer.Start("stage thinker", Span::Kind::kClient, &span.context(), kStart);
  tracer.End(child, kStart + absl::Milliseconds(50));
  tracer.End(span, kStart + absl::Milliseconds(100));
  // Ended: a second end records nothing more.
  tracer.End(span, kStart + absl::Milliseconds(200));

  std::vector<SpanProto> kept = Kept(tracer);
  ASSERT_EQ(kept.size(), 2u);
  const SpanProto& generate = kept[1];
  EXPECT_EQ(generate.name(), "Generate");
  EXPECT_EQ(generate.kind(), SpanProto::SPAN_KIND_SERVER);
  EXPECT_EQ(generate.trace_id(), caller.trace_id);
  EXPECT_EQ(generate.parent_span_id(), caller.span_id);
  EXPECT_EQ(generate.trace_state(), "k=v");
  EXPECT_EQ(generate.flags() & 0xff, 1u);
  EXPECT_EQ(generate.start_time_unix_nano(), 1700000000ull * 1000000000ull);
  EXPECT_EQ(generate.end_time_unix_nano() - generate.start_time_unix_nano(), 100000000ull);
  ASSERT_EQ(generate.attributes_size(), 4);
  EXPECT_EQ(generate.attributes(0).key(), "omnistage.identity");
  EXPECT_EQ(generate.attributes(0).value().string_value(), "alice");
  EXPECT_EQ(generate.attributes(1).value().int_value(), 12);
  EXPECT_TRUE(generate.attributes(2).value().bool_value());
  EXPECT_DOUBLE_EQ(generate.attributes(3).value().double_value(), 0.25);
  ASSERT_EQ(generate.events_size(), 1);
  EXPECT_EQ(generate.events(0).name(), "first_output");
  EXPECT_EQ(generate.events(0).attributes(0).value().string_value(), "thinker");
  EXPECT_EQ(generate.status().code(), opentelemetry::proto::trace::v1::Status::STATUS_CODE_ERROR);
  EXPECT_EQ(generate.status().message(), "stage 1 failed");
  // The child's parent is the span.
  EXPECT_EQ(kept[0].parent_span_id(), generate.span_id());
  EXPECT_EQ(kept[0].kind(), SpanProto::SPAN_KIND_CLIENT);
}

TEST_F(TracerTest, AnAttributeSetAgainTakesTheNewValue) {
  Tracer& tracer = MakeTracer("always_on");
  Span span = tracer.Start("stage talker", Span::Kind::kClient, nullptr, kStart);
  span.Set("omnistage.replica", 0);
  span.Set("omnistage.replica", 1);
  tracer.End(span, kStart);
  std::vector<SpanProto> kept = Kept(tracer);
  ASSERT_EQ(kept.size(), 1u);
  ASSERT_EQ(kept[0].attributes_size(), 1);
  EXPECT_EQ(kept[0].attributes(0).value().int_value(), 1);
}

TEST_F(TracerTest, ANewTraceHasARootSpan) {
  Tracer& tracer = MakeTracer("always_on");
  Span span = tracer.Start("speech", Span::Kind::kServer, nullptr, kStart);
  ASSERT_TRUE(span.recording());
  tracer.End(span, kStart);
  std::vector<SpanProto> kept = Kept(tracer);
  ASSERT_EQ(kept.size(), 1u);
  EXPECT_EQ(kept[0].parent_span_id(), "");
  EXPECT_EQ(kept[0].trace_id().size(), 16u);
}

// Not sampled: nothing recorded, but the decision travels on.
TEST(TracerSamplingTest, AnUnsampledSpanCarriesItsDecision) {
  KeepingTracer traced;
  Tracer& tracer = traced.tracer();
  const TraceContext caller =
      *TraceContext::Parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00");
  Span span = tracer.Start("Generate", Span::Kind::kServer, &caller, kStart);
  EXPECT_TRUE(span.started());
  EXPECT_FALSE(span.recording());
  EXPECT_EQ(span.context().trace_id, caller.trace_id);
  EXPECT_FALSE(span.context().sampled());
  span.Set("ignored", 1);
  tracer.End(span, kStart);
  KeepingTracer ratio("traceidratio", "0");
  Span none = ratio.tracer().Start("x", Span::Kind::kInternal, nullptr, kStart);
  EXPECT_FALSE(none.recording());
  ratio.tracer().End(none, kStart);
  EXPECT_TRUE(traced.Flush().empty());
  EXPECT_TRUE(ratio.Flush().empty());
}

// A transport that never answers until told: the exporter's queue fills.
class StuckTransport : public OtlpTransport {
 public:
  absl::Status Send(const std::string&, absl::Duration) override {
    release_.WaitForNotification();
    return absl::UnavailableError("down");
  }
  std::string Describe() const override { return "stuck"; }
  void Release() { release_.Notify(); }

 private:
  absl::Notification release_;
};

TEST(TracerQueueTest, WhileTheQueueIsFullSpansAreNotRecordedButCountedAndPassedOn) {
  OtlpExportOptions options;
  options.max_queue = 2;
  options.max_batch = 1;
  options.delay = absl::Milliseconds(1);
  auto transport = std::make_unique<StuckTransport>();
  StuckTransport* stuck = transport.get();
  Tracer tracer(*Sampler::Parse("always_on", ""),
                std::make_unique<OtlpExporter>(options, std::move(transport)));
  // One batch in the stuck send, two queued: full.
  for (int i = 0; i < 3; ++i) {
    Span span = tracer.Start("queued", Span::Kind::kInternal, nullptr, kStart);
    tracer.End(span, kStart);
    absl::SleepFor(absl::Milliseconds(20));
  }
  ASSERT_TRUE(tracer.exporter()->full());
  const int64_t dropped = tracer.exporter()->dropped();
  Span span = tracer.Start("Generate", Span::Kind::kServer, nullptr, kStart);
  EXPECT_TRUE(span.started());
  EXPECT_FALSE(span.recording());
  // Its decision still goes to its children (other processes record them).
  EXPECT_TRUE(span.context().sampled());
  Span child = tracer.Start("stage", Span::Kind::kClient, &span.context(), kStart);
  EXPECT_EQ(child.context().trace_id, span.context().trace_id);
  tracer.End(child, kStart);
  tracer.End(span, kStart);
  EXPECT_EQ(tracer.exporter()->dropped(), dropped + 2);
  stuck->Release();
  tracer.exporter()->Shutdown(absl::Seconds(5));
}

TEST(TracerOffTest, AnOffTracerStartsNothing) {
  Tracer tracer;
  EXPECT_FALSE(tracer.enabled());
  Span span = tracer.Start("Generate", Span::Kind::kServer, nullptr, absl::Now());
  EXPECT_FALSE(span.started());
  EXPECT_FALSE(span.recording());
  tracer.End(span, absl::Now());
}

}  // namespace
}  // namespace omnistage
