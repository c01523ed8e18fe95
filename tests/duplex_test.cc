// GenerateDuplex end to end, as processes: a talker -> vocoder pipeline
// (pipelines/local_tts.yaml's engines) speaks text streamed into a
// running request, the first sentence before the input ends; cancelling the
// call, or an Abort by id, stops it on every stage; input past the limits ends
// the request with a clear error; a malformed call fails alone.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/pipeline_harness.h"
#include "tests/pipeline_test_util.h"

namespace omnistage {
namespace {

using ::testing::HasSubstr;

constexpr absl::Duration kCallTimeout = absl::Seconds(60);

PipelineSpec TtsSpec() {
  PipelineSpec spec;
  spec.name = "tts";
  spec.stages.push_back(Stage("talker", "talker", "batch_size=64,step_time_us=1000,max_tokens=100000",
                              1, false, "tokens"));
  spec.stages.push_back(Stage("vocoder", "vocoder",
                              "batch_size=64,step_time_us=1000,max_tokens=100000", 1, true,
                              "audio", "streaming"));
  spec.limits = {"input_idle_ms: 1500", "max_input_chunk_bytes: 4096"};
  return spec;
}

v1::Payload Text(const std::string& text) {
  v1::Payload p;
  p.mutable_text()->set_text(text);
  return p;
}

class DuplexProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    pipeline_ = StartPipeline(TtsSpec());
    ASSERT_NE(pipeline_, nullptr);
  }
  std::unique_ptr<GenerateCall> Duplex(const std::string& id, const std::string& prompt = "") {
    return std::make_unique<GenerateCall>(pipeline_->stub(), MakeRequest(id, prompt), kCallTimeout,
                                          "", GenerateCall::DuplexTag());
  }
  std::unique_ptr<PipelineHarness> pipeline_;
};

TEST_F(DuplexProcessTest, SpeaksEachSentenceWhileTheNextIsStillBeingTyped) {
  auto call = Duplex("typed", "Hello there");
  ASSERT_TRUE(call->Send({Text(", how are you today.\n")}));
  // The first sentence is heard while the input is still open.
  ASSERT_TRUE(call->WaitUntil([](const GenerateResult& r) { return !r.audio.empty(); },
                              absl::Seconds(20)))
      << call->Snapshot().Summary();
  const size_t first_sentence = call->Snapshot().audio.size();
  ASSERT_TRUE(call->Send({Text("The sea "), Text("is calm tonight.\n")}));
  ASSERT_TRUE(call->Send({Text("Good bye.")}, /*last=*/true));
  const GenerateResult typed = call->Wait(kCallTimeout);
  ExpectOneTerminal(typed);
  EXPECT_EQ(typed.terminal.finish_reason(), v1::FINISH_REASON_STOP) << typed.Summary();
  EXPECT_GT(typed.audio.size(), first_sentence);
  // The same text sent whole speaks the same samples: how the text was
  // chunked changes nothing.
  GenerateCall whole(pipeline_->stub(),
                     MakeRequest("whole", "Hello there, how are you today.\nThe sea is calm "
                                          "tonight.\nGood bye."),
                     kCallTimeout);
  const GenerateResult all = whole.Wait(kCallTimeout);
  ExpectOneTerminal(all);
  EXPECT_EQ(all.audio, typed.audio);
  ExpectPipelineBecomesIdle(*pipeline_, absl::Seconds(10));
}

TEST_F(DuplexProcessTest, TheHalfCloseCompletesTheInput) {
  auto call = Duplex("closed", "Short and sweet.");
  ASSERT_TRUE(call->CloseInput());
  const GenerateResult r = call->Wait(kCallTimeout);
  ExpectOneTerminal(r);
  EXPECT_EQ(r.terminal.finish_reason(), v1::FINISH_REASON_STOP) << r.Summary();
  EXPECT_FALSE(r.audio.empty());
}

TEST_F(DuplexProcessTest, CancellingTheCallStopsItOnEveryStage) {
  auto call = Duplex("cancelled", "One sentence to start with.\n");
  ASSERT_TRUE(call->WaitUntil([](const GenerateResult& r) { return !r.audio.empty(); },
                              absl::Seconds(20)));
  call->Cancel();
  const GenerateResult r = call->Wait(kCallTimeout);
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::CANCELLED) << r.Summary();
  ExpectPipelineBecomesIdle(*pipeline_, absl::Seconds(10));
}

TEST_F(DuplexProcessTest, AnAbortByIdEndsItAsAborted) {
  auto call = Duplex("aborted", "Still typing");
  ASSERT_TRUE(
      Eventually([&] { return pipeline_->Status().ok() && pipeline_->Status()->in_flight_requests() == 1; },
                 absl::Seconds(10)));
  grpc::ClientContext context;
  v1::AbortRequest abort;
  abort.add_request_ids("aborted");
  v1::AbortResponse answer;
  ASSERT_TRUE(pipeline_->stub()->Abort(&context, abort, &answer).ok());
  ASSERT_EQ(answer.results_size(), 1);
  EXPECT_EQ(answer.results(0).outcome(), v1::AbortResult::OUTCOME_ABORTED);
  const GenerateResult r = call->Wait(kCallTimeout);
  ExpectOneTerminal(r);
  EXPECT_EQ(r.terminal.finish_reason(), v1::FINISH_REASON_ABORT) << r.Summary();
  ExpectPipelineBecomesIdle(*pipeline_, absl::Seconds(10));
}

TEST_F(DuplexProcessTest, InputPastTheLimitsEndsOnlyItsRequest) {
  auto late = Duplex("late", "First.\n");
  ASSERT_TRUE(late->Send({Text("Last.")}, /*last=*/true));
  late->Send({Text("One more.")});
  auto big = Duplex("big");
  big->Send({Text(std::string(5000, 'a'))});
  auto silent = Duplex("silent", "Then nothing");
  auto fine = Duplex("fine", "All is well.\n");
  const GenerateResult r_late = late->Wait(kCallTimeout);
  const GenerateResult r_big = big->Wait(kCallTimeout);
  // The well-behaved one goes on (and says it is done before its own pause
  // outlasts limits.input_idle_ms).
  ASSERT_TRUE(fine->Send({}, /*last=*/true));
  const GenerateResult r_silent = silent->Wait(kCallTimeout);
  for (const GenerateResult* r : {&r_late, &r_big, &r_silent}) {
    ExpectOneTerminal(*r);
    EXPECT_EQ(r->terminal.finish_reason(), v1::FINISH_REASON_ERROR) << r->Summary();
  }
  EXPECT_THAT(r_late.terminal.error().message(), HasSubstr("said it was the last"));
  EXPECT_THAT(r_big.terminal.error().message(), HasSubstr("limits.max_input_chunk_bytes"));
  EXPECT_THAT(r_silent.terminal.error().message(), HasSubstr("limits.input_idle_ms"));
  const GenerateResult r_fine = fine->Wait(kCallTimeout);
  EXPECT_EQ(r_fine.terminal.finish_reason(), v1::FINISH_REASON_STOP) << r_fine.Summary();
  ExpectPipelineBecomesIdle(*pipeline_, absl::Seconds(10));
}

TEST_F(DuplexProcessTest, AMalformedCallFailsAlone) {
  // A first message without a request.
  {
    grpc::ClientContext context;
    auto stream = pipeline_->stub()->GenerateDuplex(&context);
    v1::GenerateInput input;
    input.mutable_input()->set_last(true);
    stream->Write(input);
    stream->WritesDone();
    v1::GenerateResponse response;
    while (stream->Read(&response)) {
    }
    const grpc::Status status = stream->Finish();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(status.error_message(), HasSubstr("carries `request`"));
  }
  // A call closed before its first message.
  {
    grpc::ClientContext context;
    auto stream = pipeline_->stub()->GenerateDuplex(&context);
    stream->WritesDone();
    v1::GenerateResponse response;
    while (stream->Read(&response)) {
    }
    EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  }
  auto call = Duplex("after", "Still fine.\n");
  ASSERT_TRUE(call->CloseInput());
  const GenerateResult r = call->Wait(kCallTimeout);
  EXPECT_EQ(r.terminal.finish_reason(), v1::FINISH_REASON_STOP) << r.Summary();
}

}  // namespace
}  // namespace omnistage
