// PipelineCore's streamed input (GenerateDuplex): input goes to stage 0 in
// order on the replica the request is bound to, is held while the request
// queues, and input that breaks the contract or the limits ends the request,
// stopped on every stage.
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "orchestrator/core/testing/pipeline_core_harness.h"

namespace omnistage {
namespace pipeline_core_test {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

class PipelineCoreInputTest : public PipelineCoreTest {
 protected:
  // Starts a streamed-input request `id` with `prompt` (may be empty).
  std::shared_ptr<FakeResponseSink> Duplex(const std::string& id, const std::string& prompt = "") {
    v1::GenerateRequest request;
    request.set_request_id(id);
    request.set_prompt(prompt);
    auto sink = std::make_shared<FakeResponseSink>();
    sinks_.push_back(sink);
    core().Generate(std::move(request), sink, "", Caller(), /*streamed_input=*/true);
    return sink;
  }
  void Input(const std::string& id, const FakeResponseSink& sink, std::vector<v1::Payload> chunks,
             bool last = false) {
    v1::GenerateInput message;
    for (v1::Payload& p : chunks) *message.mutable_input()->add_payloads() = std::move(p);
    message.mutable_input()->set_last(last);
    core().AppendInput(id, &sink, std::move(message));
  }
  // Stage 0's replica `replica` says its engine takes input `streamed`.
  void ReadyStageZero(int replica, v1::StreamedInput streamed, const std::string& instance) {
    v1::Ready ready;
    ready.set_stage_id(0);
    ready.set_instance_id(instance);
    ready.set_capacity(8);
    ready.set_streamed_input(streamed);
    core().OnReplicaReady(0, replica, ready);
  }
  // The request's input as stage 0 got it: the AddRequest's, then every append's.
  std::string StageZeroText(int replica = 0) {
    std::string text;
    for (const v1::AddRequest& add : fake(0, replica).adds()) {
      for (const v1::Payload& p : add.input()) text += p.text().text();
    }
    for (const v1::AppendInput& append : fake(0, replica).appends()) {
      for (const v1::Payload& p : append.chunks()) text += p.text().text();
    }
    return text;
  }
};

TEST_F(PipelineCoreInputTest, InputFollowsThePromptToStageZeroInOrderAndLastCompletesIt) {
  Build();
  auto sink = Duplex("r1", "Hello");
  ASSERT_EQ(sink->fail_count(), 0);
  ASSERT_EQ(fake(0, 0).adds().size(), 1u);
  EXPECT_FALSE(fake(0, 0).adds()[0].input_complete());
  Input("r1", *sink, {Text(" wide")});
  Input("r1", *sink, {Text(" world"), Text(".")}, /*last=*/true);
  EXPECT_THAT(LogWith(".append r1"), ElementsAre("T0.append r1", "T0.append r1 last"));
  EXPECT_EQ(StageZeroText(), "Hello wide world.");
  // The request then runs as any other.
  Done(0, 0, "r1", {Text("Hi.")});
  Done(1, 0, "r1", {Codes({1, 2})});
  Done(2, 0, "r1", {Audio("ab")});
  EXPECT_EQ(sink->terminal().finish_reason(), v1::FINISH_REASON_STOP);
}

TEST_F(PipelineCoreInputTest, AnEmptyPromptSendsNoInputUntilTheClientDoes) {
  Build();
  auto sink = Duplex("r1");
  ASSERT_EQ(fake(0, 0).adds().size(), 1u);
  EXPECT_EQ(fake(0, 0).adds()[0].input_size(), 0);
  Input("r1", *sink, {}, /*last=*/true);
  EXPECT_THAT(LogWith(".append r1"), ElementsAre("T0.append r1 last"));
  ASSERT_TRUE(AbortNow({"r1"}).ok());
}

TEST_F(PipelineCoreInputTest, APlainGenerateStillNeedsAPrompt) {
  Build();
  v1::GenerateRequest request;
  request.set_request_id("r1");
  auto sink = Gen(request);
  EXPECT_EQ(sink->fail_status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(PipelineCoreInputTest, AStageZeroWhoseEngineTakesNoPiecesRefusesTheCall) {
  Build();
  ReadyStageZero(0, v1::STREAMED_INPUT_NONE, "T0#2");
  auto sink = Duplex("r1", "Hello");
  EXPECT_EQ(sink->fail_status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(sink->fail_status().message(), HasSubstr("takes no streamed input"));
  EXPECT_TRUE(fake(0, 0).adds().empty());
  // A plain Generate is fine.
  Gen("r2");
  ASSERT_TRUE(AbortNow({"r2"}).ok());
}

TEST_F(PipelineCoreInputTest, InputWhileQueuedGoesWithTheAddRequest) {
  PipelineConfig config = OmniConfig(Shape());
  config.max_queued = 10;
  config.admission_headroom = 0;
  Build(std::move(config));
  ReadyStageZero(0, v1::STREAMED_INPUT_WHOLE, "T0#2");  // capacity 8
  std::vector<std::string> running;
  for (int i = 0; i < 8; ++i) {
    running.push_back(absl::StrCat("busy", i));
    Gen(running.back());
  }
  auto sink = Duplex("r1", "Hello");
  EXPECT_EQ(sink->fail_count(), 0);
  EXPECT_EQ(fake(0, 0).adds().size(), 8u);  // r1 waits
  Input("r1", *sink, {Text(" there")});
  Input("r1", *sink, {Text("!")}, /*last=*/true);
  EXPECT_TRUE(LogWith(".append r1").empty());
  Done(0, 0, "busy0", {Text("x")});  // frees a slot
  ASSERT_EQ(fake(0, 0).adds().size(), 9u);
  const v1::AddRequest& add = fake(0, 0).adds()[8];
  EXPECT_EQ(add.request_id(), "r1");
  EXPECT_TRUE(add.input_complete());
  std::string text;
  for (const v1::Payload& p : add.input()) text += p.text().text();
  EXPECT_EQ(text, "Hello there!");
  LeaveOpen("the busy requests run on");
}

TEST_F(PipelineCoreInputTest, InputAfterTheLastEndsTheRequestAndStopsItEverywhere) {
  Build();
  auto sink = Duplex("r1", "Hello");
  Input("r1", *sink, {Text(" you")}, /*last=*/true);
  Input("r1", *sink, {Text(" again")});
  ASSERT_EQ(sink->terminal_count(), 1);
  EXPECT_EQ(sink->terminal().finish_reason(), v1::FINISH_REASON_ERROR);
  EXPECT_EQ(sink->terminal().error().code(), static_cast<int>(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(sink->terminal().error().message(), HasSubstr("after the message that said"));
  EXPECT_EQ(sink->terminal().error().field(), "input.last");
  EXPECT_THAT(LogWith(".abort"), ElementsAre("T0.abort [r1]"));
  EXPECT_EQ(StageZeroText(), "Hello you");
}

TEST_F(PipelineCoreInputTest, EachLimitEndsOnlyItsRequest) {
  PipelineConfig config = OmniConfig(Shape());
  config.max_input_chunk_bytes = 64;
  config.max_input_bytes = 100;
  Build(std::move(config));
  auto big = Duplex("big");
  auto total = Duplex("total");
  auto empty = Duplex("empty");
  auto audio = Duplex("audio");
  auto request = Duplex("request");
  auto fine = Duplex("fine");
  Input("big", *big, {Text(std::string(80, 'a'))});
  for (int i = 0; i < 3; ++i) Input("total", *total, {Text(std::string(40, 'b'))});
  Input("empty", *empty, {v1::Payload()});
  v1::Payload odd = Audio("abc");  // 3 bytes: no whole 16-bit sample
  Input("audio", *audio, {odd});
  v1::GenerateInput again;
  again.mutable_request()->set_prompt("twice");
  core().AppendInput("request", request.get(), again);
  Input("fine", *fine, {Text("ok")}, /*last=*/true);
  struct Refused {
    std::shared_ptr<FakeResponseSink> sink;
    std::string why;
    std::string field;  // what a client reads instead of the message
  };
  const std::vector<Refused> refused = {
      {big, "limits.max_input_chunk_bytes", "limits.max_input_chunk_bytes"},
      {total, "limits.max_input_bytes", "limits.max_input_bytes"},
      {empty, "input.payloads[0] has no content", "input.payloads[0]"},
      {audio, "not whole 16-bit mono samples", "input.payloads[0].audio.pcm_s16le"},
      {request, "carry `input`", "request"}};
  for (const Refused& r : refused) {
    ASSERT_EQ(r.sink->terminal_count(), 1) << r.why;
    EXPECT_EQ(r.sink->terminal().error().code(),
              static_cast<int>(absl::StatusCode::kInvalidArgument))
        << r.why;
    EXPECT_THAT(r.sink->terminal().error().message(), HasSubstr(r.why));
    EXPECT_EQ(r.sink->terminal().error().field(), r.field);
  }
  EXPECT_EQ(fine->terminal_count(), 0);
  EXPECT_EQ(core().in_flight(), 1u);
  ASSERT_TRUE(AbortNow({"fine"}).ok());
  // Counted by reason: the operator sees which limit clients meet.
  const std::string metrics = core().metrics_registry().Render();
  EXPECT_THAT(metrics, HasSubstr("omnistage_duplex_requests_total 6\n"));
  EXPECT_THAT(metrics,
              HasSubstr("omnistage_streamed_input_refusals_total{reason=\"chunk_too_large\"} 1\n"));
  EXPECT_THAT(metrics,
              HasSubstr("omnistage_streamed_input_refusals_total{reason=\"too_much\"} 1\n"));
  EXPECT_THAT(metrics,
              HasSubstr("omnistage_streamed_input_refusals_total{reason=\"malformed\"} 3\n"));
  // Two of total's 40-byte chunks (46 bytes encoded, as the limits count) and
  // fine's last "ok" (10) went through.
  EXPECT_THAT(metrics, HasSubstr("omnistage_streamed_input_bytes_total 102\n"));
}

TEST_F(PipelineCoreInputTest, AClientSilentPastTheInputIdleLimitEndsItsRequest) {
  PipelineConfig config = OmniConfig(Shape());
  config.input_idle_timeout = absl::Seconds(10);
  config.request_idle_timeout = absl::Seconds(3);
  Build(std::move(config));
  auto sink = Duplex("r1", "Hello");
  // Stage 0 waits for the rest of its input: the request's own idle limit
  // (3 s) does not end it; each message restarts the input's.
  for (int i = 0; i < 3; ++i) {
    scheduler_.AdvanceBy(absl::Seconds(8));
    Input("r1", *sink, {Text(".")});
  }
  EXPECT_EQ(sink->terminal_count(), 0);
  scheduler_.AdvanceBy(absl::Seconds(10));
  ASSERT_EQ(sink->terminal_count(), 1);
  EXPECT_EQ(sink->terminal().error().code(), static_cast<int>(absl::StatusCode::kDeadlineExceeded));
  EXPECT_THAT(sink->terminal().error().message(), HasSubstr("limits.input_idle_ms"));
  EXPECT_EQ(sink->terminal().error().field(), "limits.input_idle_ms");
  EXPECT_THAT(LogWith(".abort"), ElementsAre("T0.abort [r1]"));
  EXPECT_THAT(core().metrics_registry().Render(),
              HasSubstr("omnistage_streamed_input_refusals_total{reason=\"idle\"} 1\n"));
}

TEST_F(PipelineCoreInputTest, OnceTheInputIsCompleteTheRequestIdleLimitAppliesAgain) {
  PipelineConfig config = OmniConfig(Shape());
  config.request_idle_timeout = absl::Seconds(3);
  Build(std::move(config));
  auto sink = Duplex("r1", "Hello");
  Input("r1", *sink, {}, /*last=*/true);
  scheduler_.AdvanceBy(absl::Seconds(4));
  ASSERT_EQ(sink->terminal_count(), 1);
  EXPECT_THAT(sink->terminal().error().message(), HasSubstr("request_idle_timeout"));
}

TEST_F(PipelineCoreInputTest, InputForAnotherCallsRequestOrAnEndedOneGoesNowhere) {
  Build();
  auto sink = Duplex("r1", "Hello");
  FakeResponseSink stranger;
  Input("r1", stranger, {Text(" hijack")}, /*last=*/true);
  EXPECT_TRUE(fake(0, 0).appends().empty());
  auto plain = Gen("r2");
  Input("r2", *plain, {Text(" more")});  // Not a streamed-input request.
  EXPECT_TRUE(fake(0, 0).appends().empty());
  ASSERT_TRUE(AbortNow({"r1", "r2"}).ok());
  Input("r1", *sink, {Text(" late")});
  EXPECT_TRUE(fake(0, 0).appends().empty());
}

TEST_F(PipelineCoreInputTest, OutputsStreamBackWhileTheInputIsStillOpen) {
  Build();
  auto sink = Duplex("r1", "Hello");
  Out(0, 0, "r1", {Text("Hi")});
  EXPECT_EQ(sink->Text("r1"), "Hi");
  Input("r1", *sink, {Text(" more")}, /*last=*/true);
  EXPECT_EQ(StageZeroText(), "Hello more");
  ASSERT_TRUE(AbortNow({"r1"}).ok());
}

}  // namespace
}  // namespace pipeline_core_test
}  // namespace omnistage
