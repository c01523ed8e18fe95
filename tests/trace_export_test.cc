// Traces across real processes (docs/observability.md, "Traces"): an
// orchestrator and its stage workers export their spans over OTLP/gRPC to a
// collector of the test's own; one request is one trace under the client's
// span: Generate (orchestrator) -> a span per stage -> that stage's worker's
// engine span, each process naming itself; an abort shows on both sides.
#include <cstdlib>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/algorithm/container.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/tracing/testing/otlp_collector.h"
#include "common/tracing/testing/span_fields.h"
#include "gtest/gtest.h"
#include "tests/generate_call.h"
#include "tests/pipeline_harness.h"
#include "tests/pipeline_test_util.h"

namespace omnistage {
namespace {

constexpr char kTraceId[] = "4bf92f3577b34da6a3ce929d0e0e4736";
constexpr char kClientSpan[] = "00f067aa0ba902b7";

std::string Hex(const std::string& bytes) { return absl::BytesToHexString(bytes); }

class TraceExportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Batches go out within 50 ms (the processes inherit the environment).
    setenv("OTEL_BSP_SCHEDULE_DELAY", "50", 1);
    PipelineSpec spec = OmniSpec(/*thinker_step_us=*/2000);
    const std::vector<std::string> flags = {"--otlp_traces_endpoint=" + collector_.endpoint(),
                                            "--otlp_protocol=grpc"};
    for (StageSpec& stage : spec.stages) {
      stage.worker_flags.insert(stage.worker_flags.end(), flags.begin(), flags.end());
    }
    spec.orchestrator_flags.insert(spec.orchestrator_flags.end(), flags.begin(), flags.end());
    pipeline_ = StartPipeline(spec);
    ASSERT_NE(pipeline_, nullptr);
  }

  // Generate `request` under the client's span `span_id`, reading it to its
  // end; `on_first` runs after the first response.
  grpc::Status Generate(const v1::GenerateRequest& request, const std::string& span_id,
                        const std::function<void()>& on_first = nullptr) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    context.AddMetadata("traceparent", absl::StrCat("00-", kTraceId, "-", span_id, "-01"));
    context.AddMetadata("tracestate", "vendor=opaque");
    auto reader = pipeline_->stub()->Generate(&context, request);
    v1::GenerateResponse response;
    bool first = true;
    while (reader->Read(&response)) {
      if (first && on_first) on_first();
      first = false;
    }
    return reader->Finish();
  }

  // The spans of request `id` (the orchestrator's, by their request id
  // attribute, and the workers').
  std::vector<CollectedSpan> Of(const std::string& id) {
    std::vector<CollectedSpan> of;
    for (const CollectedSpan& c : collector_.spans()) {
      if (AttributeOf(c.span, "omnistage.request_id") == id) of.push_back(c);
    }
    // Stage spans carry no request id: they are the Generate span's children.
    std::string generate;
    for (const CollectedSpan& c : of) {
      if (c.span.name() == "Generate") generate = c.span.span_id();
    }
    for (const CollectedSpan& c : collector_.spans()) {
      if (!generate.empty() && c.span.parent_span_id() == generate) of.push_back(c);
    }
    return of;
  }

  OtlpCollector collector_;
  std::unique_ptr<PipelineHarness> pipeline_;
};

TEST_F(TraceExportTest, ARequestIsOneTraceAcrossTheProcesses) {
  ASSERT_TRUE(Generate(MakeRequest("traced", "Hello there."), kClientSpan).ok());
  // Generate, three stages, three engines.
  ASSERT_TRUE(collector_.WaitFor(
      [&](const std::vector<CollectedSpan>&) { return Of("traced").size() >= 7; },
      absl::Seconds(30)))
      << Of("traced").size() << " spans";
  std::map<std::string, CollectedSpan> stages;  // stage span id -> span
  const CollectedSpan* generate = nullptr;
  std::vector<CollectedSpan> spans = Of("traced");
  for (const CollectedSpan& c : spans) {
    EXPECT_EQ(Hex(c.span.trace_id()), kTraceId) << c.span.name();
    if (c.span.name() == "Generate") generate = &c;
    if (absl::StartsWith(c.span.name(), "stage ")) stages[c.span.span_id()] = c;
  }
  ASSERT_NE(generate, nullptr);
  EXPECT_EQ(generate->service, "orchestrator");
  EXPECT_EQ(Hex(generate->span.parent_span_id()), kClientSpan);
  EXPECT_EQ(generate->span.trace_state(), "vendor=opaque");
  ASSERT_EQ(stages.size(), 3u);
  int engines = 0;
  for (const CollectedSpan& c : spans) {
    if (c.span.name() != "engine") continue;
    ++engines;
    EXPECT_EQ(c.service, "stage_worker");
    // Each engine span is the child of the stage span that sent it.
    ASSERT_EQ(stages.count(c.span.parent_span_id()), 1u);
    EXPECT_TRUE(absl::c_linear_search(EventNamesOf(c.span), "first_output"));
    EXPECT_TRUE(absl::c_linear_search(EventNamesOf(c.span), "taken"));
    EXPECT_EQ(AttributeOf(c.span, "gen_ai.response.finish_reasons"), "stop");
  }
  EXPECT_EQ(engines, 3);
}

TEST_F(TraceExportTest, AnAbortShowsInTheOrchestratorAndTheWorker) {
  v1::GenerateRequest request = MakeRequest("aborted", "Talk for a long while.");
  // Long enough on the thinker to be aborted there.
  *request.add_stage_params() = StageParams(0, 900);
  ASSERT_TRUE(Generate(request, "00f067aa0ba902b8", [&] {
                ASSERT_TRUE(pipeline_->Abort({"aborted"}).ok());
              }).ok());
  ASSERT_TRUE(collector_.WaitFor(
      [&](const std::vector<CollectedSpan>&) {
        for (const CollectedSpan& c : Of("aborted")) {
          if (c.span.name() == "engine" && absl::c_linear_search(EventNamesOf(c.span), "aborted"))
            return true;
        }
        return false;
      },
      absl::Seconds(30)));
  bool generate_saw_it = false;
  for (const CollectedSpan& c : Of("aborted")) {
    if (c.span.name() == "Generate") {
      generate_saw_it = absl::c_linear_search(EventNamesOf(c.span), "abort_requested") &&
                        AttributeOf(c.span, "gen_ai.response.finish_reasons") == "abort";
    }
  }
  EXPECT_TRUE(generate_saw_it);
}

}  // namespace
}  // namespace omnistage
