// Tests for PipelineCore's admission: what a Generate request may ask (each
// invalid field refused with INVALID_ARGUMENT), duplicates and overload, and a
// request id not taken again while a stop of its last use (abort, cancel,
// clean-up) still runs. Fakes only.
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "orchestrator/core/pipeline_core.h"
#include "orchestrator/core/testing/pipeline_core_harness.h"

namespace omnistage {
namespace pipeline_core_test {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;

TEST_F(PipelineCoreTest, InvalidRequestsFailWithInvalidArgument) {
  Build();
  struct Case {
    std::string what;
    std::function<void(v1::GenerateRequest&)> edit;
    std::string words;
  };
  const std::vector<Case> cases = {
      {"empty prompt", [](auto& r) { r.clear_prompt(); }, "prompt is empty"},
      {"oversized prompt", [](auto& r) { r.set_prompt(std::string(33, 'x')); }, "limit is 32"},
      {"bad id chars", [](auto& r) { r.set_request_id("a b/c"); }, "request_id"},
      {"long id", [](auto& r) { r.set_request_id(std::string(129, 'i')); }, "limit is 128"},
      {"long session key", [](auto& r) { r.set_session_key(std::string(257, 's')); },
       "session_key is 257 bytes; the limit is 256"},
      {"modality 99", [](auto& r) { r.add_output_modalities(static_cast<v1::Modality>(99)); },
       "unknown modality 99"},
      {"unspecified modality", [](auto& r) { r.add_output_modalities(v1::MODALITY_UNSPECIFIED); },
       "unknown modality"},
      {"no final stage makes it", [](auto& r) { r.add_output_modalities(v1::MODALITY_TOKENS); },
       "produces tokens"},
      {"no such stage", [](auto& r) { r.add_stage_params()->set_stage_id(3); }, "no stage 3"},
      {"negative stage", [](auto& r) { r.add_stage_params()->set_stage_id(-1); }, "no stage -1"},
      {"stage twice",
       [](auto& r) {
         r.add_stage_params()->set_stage_id(1);
         r.add_stage_params()->set_stage_id(1);
       },
       "stage 1 given twice"},
      {"40 KiB of extras",
       [](auto& r) {
         v1::StageParameters* p = r.add_stage_params();
         p->set_stage_id(0);
         (*p->mutable_extra())["blob"] = std::string(40 << 10, 'x');
       },
       "the request's fields besides the prompt take 409"},
      {"max_tokens 0",
       [](auto& r) {
         v1::StageParameters* p = r.add_stage_params();
         p->set_stage_id(0);
         p->set_max_tokens(0);
       },
       "max_tokens"},
      // Found by fuzz/generate_abort_fuzzer: these went to the engines as given.
      {"temperature NaN",
       [](auto& r) {
         v1::StageParameters* p = r.add_stage_params();
         p->set_stage_id(0);
         p->set_temperature(std::nanf(""));
       },
       "stage_params[stage 0].temperature must be a number in [0, 100]"},
      {"temperature negative",
       [](auto& r) {
         v1::StageParameters* p = r.add_stage_params();
         p->set_stage_id(1);
         p->set_temperature(-0.5f);
       },
       "temperature"},
  };
  for (const Case& c : cases) {
    v1::GenerateRequest request;
    request.set_request_id("ok-id_1.2:3");
    request.set_prompt("Hi");
    c.edit(request);
    auto sink = Gen(request);
    EXPECT_EQ(sink->fail_status().code(), absl::StatusCode::kInvalidArgument) << c.what;
    EXPECT_THAT(sink->fail_status().message(), HasSubstr(c.words)) << c.what;
    EXPECT_EQ(sink->terminal_count(), 0) << c.what;
    EXPECT_EQ(core().in_flight(), 0u) << c.what;
  }
  EXPECT_THAT(log_, IsEmpty()) << "an invalid request reached a worker";
  // The edge values are accepted.
  v1::GenerateRequest edge;
  edge.set_request_id(std::string(128, 'i'));
  edge.set_prompt(std::string(32, 'x'));
  edge.add_output_modalities(v1::MODALITY_TEXT);
  auto sink = Gen(edge);
  EXPECT_EQ(sink->end_count(), 0);
  Done(0, 0, std::string(128, 'i'));
}

TEST_F(PipelineCoreTest, AdmissionRejectsDuplicatesAndOverload) {
  PipelineConfig config = OmniConfig(Shape());
  config.max_in_flight = 2;
  Build(std::move(config));
  auto first = Gen("dup", {v1::MODALITY_TEXT});
  auto again = Gen("dup", {v1::MODALITY_TEXT});
  EXPECT_EQ(again->fail_status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(again->fail_status().message(), HasSubstr("'dup'"));
  EXPECT_EQ(first->end_count(), 0) << "the duplicate disturbed the original";

  // Empty ids get distinct generated ones.
  auto gen1 = Gen("", {v1::MODALITY_TEXT});
  auto gen2 = Gen("", {v1::MODALITY_TEXT});
  EXPECT_EQ(gen2->fail_status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(gen2->fail_status().message(), HasSubstr("limit is 2"));
  ASSERT_EQ(fake(0, 0).adds().size(), 2u);
  const std::string generated = fake(0, 0).adds()[1].request_id();
  EXPECT_FALSE(generated.empty());
  EXPECT_NE(generated, "dup");

  Done(0, 0, "dup");
  Done(0, 0, generated);
  EXPECT_EQ(gen1->terminal_id(), generated);
  auto gen3 = Gen("", {v1::MODALITY_TEXT});
  auto reused = Gen("dup", {v1::MODALITY_TEXT});  // Its first life ended.
  const std::string generated3 = fake(0, 0).adds()[2].request_id();
  EXPECT_NE(generated3, generated);
  EXPECT_EQ(reused->end_count(), 0);
  Done(0, 0, generated3);
  Done(0, 0, "dup");
  EXPECT_EQ(first->terminal_count(), 1);
  EXPECT_EQ(reused->terminal_count(), 1);
}

TEST_F(PipelineCoreTest, IdIsNotReusedWhileItsLastUseIsStillBeingStopped) {
  Build();
  auto first = Gen("r1", {v1::MODALITY_AUDIO});
  Out(0, 0, "r1", {Text("a")});
  Out(1, 0, "r1", {Codes({1})});
  fake(0, 0).set_hold_aborts(true);
  Out(2, 0, "r1", {Audio("pcm")}, /*finished=*/true, v1::FINISH_REASON_LENGTH);
  ASSERT_EQ(first->terminal_count(), 1);
  // The thinker has not confirmed the stop: r1 is still bound there, and a new
  // r1 would be routed to the same replica and mixed up with the old one.
  auto early = Gen("r1");
  ASSERT_EQ(early->fail_count(), 1);
  EXPECT_EQ(early->fail_status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(early->fail_status().message()),
              HasSubstr("still being stopped on stage 0"));
  ASSERT_TRUE(fake(0, 0).CompleteAbort(absl::OkStatus()));
  auto again = Gen("r1", {v1::MODALITY_TEXT});
  EXPECT_EQ(again->fail_count(), 0);
  Done(0, 0, "r1");
  EXPECT_EQ(again->terminal_count(), 1);
}

// The first r1 ends (its replica dies) while a client Abort of it still waits:
// that Abort finds its request by the name, so a new r1 must wait until it is
// over, or a second Abort of the new r1 could be committed by the first one.
// Found by fuzz/pipeline_core_fuzzer.
TEST_F(PipelineCoreTest, IdIsNotReusedWhileAnAbortOfItsLastUseRuns) {
  Shape shape;
  shape.thinkers = 2;
  Build(shape);
  auto first = Gen("r1", {v1::MODALITY_TEXT});
  fake(0, 0).set_hold_aborts(true);
  v1::AbortRequest request;
  request.add_request_ids("r1");
  int answers = 0;
  absl::StatusOr<v1::AbortResponse> result;
  core().Abort(request, absl::InfiniteFuture(), [&](absl::StatusOr<v1::AbortResponse> r) {
    ++answers;
    result = std::move(r);
  });
  core().OnReplicaDown(0, 0, absl::UnavailableError("connection reset"));
  ASSERT_EQ(first->terminal_count(), 1);

  auto early = Gen("r1", {v1::MODALITY_TEXT});
  ASSERT_EQ(early->fail_count(), 1);
  EXPECT_EQ(early->fail_status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(early->fail_status().message()), HasSubstr("still being stopped"));

  ASSERT_TRUE(fake(0, 0).CompleteAbort(absl::OkStatus()));
  ASSERT_EQ(answers, 1);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->results(0).outcome(), v1::AbortResult::OUTCOME_NOT_FOUND);
  auto again = Gen("r1", {v1::MODALITY_TEXT});
  EXPECT_EQ(again->fail_count(), 0);
  Done(0, 1, "r1", {Text("hello")});
  EXPECT_EQ(again->terminal().finish_reason(), v1::FINISH_REASON_STOP);
}

// r1 failed; stopping its leftover on the talker fails and is retried after a
// backoff; meanwhile the talker restarts (the binding goes with it). The retry
// finds its request by the name, so a new r1 must wait until the cleanup is
// over, or the retry would stop (and at last give up the binding of) the new
// one. Found by fuzz/pipeline_core_fuzzer.
TEST_F(PipelineCoreTest, IdIsNotReusedWhileACleanupOfItsLastUseRetries) {
  Build();
  auto first = Gen("r1");
  Out(0, 0, "r1", {Text("a")});  // Streaming: the talker got an Add.
  fake(1, 0).FailAborts(absl::UnavailableError("connection reset"));
  Out(0, 0, "r1", {}, /*finished=*/true, v1::FINISH_REASON_ERROR);
  ASSERT_EQ(first->terminal_count(), 1);
  Ready(1, 0, "#2");  // The talker restarted: r1's binding there is gone.
  ASSERT_EQ(core().pool(1).bindings(), 0u);

  auto early = Gen("r1");
  ASSERT_EQ(early->fail_count(), 1);
  EXPECT_EQ(early->fail_status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(early->fail_status().message()), HasSubstr("still being stopped"));

  fake(1, 0).FailAborts(absl::OkStatus());
  scheduler_.AdvanceBy(absl::Seconds(2));  // The retries find nothing left to stop.
  auto again = Gen("r1", {v1::MODALITY_TEXT});
  EXPECT_EQ(again->fail_count(), 0);
  Done(0, 0, "r1", {Text("hello")});
  EXPECT_EQ(again->terminal().finish_reason(), v1::FINISH_REASON_STOP);
}

}  // namespace
}  // namespace pipeline_core_test
}  // namespace omnistage
