// The whole system as processes: stage_worker replicas started by the test, the
// orchestrator binary in front of them, and a gRPC client. Guards the normal
// paths of docs/architecture.md end to end: streaming through three stages,
// determinism, round-robin placement on a multi-replica stage, the many-id
// Abort (one worker call per replica), and a client disconnect aborting the
// request on every stage. Failures (dead and restarted replicas, SIGTERM) are in
// fault_test.cc.
//
// Timing: the machine is small and shared, so every bound is generous and every
// wait polls for a state instead of sleeping for a guess.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/pipeline_harness.h"
#include "tests/pipeline_test_util.h"

namespace omnistage {
namespace {

// Tone vocoder defaults (OmniSpec): 40 ms of 24 kHz 16-bit mono audio per code.
constexpr size_t kBytesPerCode = 24000 * 40 / 1000 * 2;
// Hashed talker default (OmniSpec): two codes per input byte.
constexpr size_t kCodesPerChar = 2;

// ---- a. Streaming through three stages ---------------------------------------------

TEST(PipelineProcessTest, OmniPipelineStreamsTextThenAudioDeterministically) {
  std::unique_ptr<PipelineHarness> pipeline = StartPipeline(OmniSpec(/*thinker_step_us=*/2000));
  ASSERT_NE(pipeline, nullptr);
  const std::string prompt = "Tell me about the sea.";

  GenerateResult first = pipeline->Generate(MakeRequest("omni-1", prompt));
  ExpectOneTerminal(first);
  EXPECT_EQ(first.request_id, "omni-1");
  EXPECT_EQ(first.terminal.finish_reason(), v1::FINISH_REASON_STOP) << first.Summary();
  EXPECT_FALSE(first.text.empty());
  // Text streams: it arrives in messages before the one that ends the request.
  EXPECT_GT(first.responses, 1) << first.Summary();
  EXPECT_GT(first.first_text_response, 0);
  EXPECT_LT(first.first_text_response, first.terminal_response) << first.Summary();
  ASSERT_GT(first.audio.size(), 0u) << first.Summary();
  EXPECT_EQ(first.audio.size() % 2, 0u);
  // Every byte of the text was voiced: talker codes per char, vocoder audio per code.
  EXPECT_EQ(first.audio.size(), first.text.size() * kCodesPerChar * kBytesPerCode)
      << first.Summary();

  GenerateResult second = pipeline->Generate(MakeRequest("omni-2", prompt));
  ExpectOneTerminal(second);
  EXPECT_EQ(second.terminal.finish_reason(), v1::FINISH_REASON_STOP);
  EXPECT_EQ(second.text, first.text);
  EXPECT_TRUE(second.audio == first.audio) << "audio differs between identical requests";

  // Two requests in flight together go to different talker replicas.
  std::vector<absl::StatusOr<WorkerStats>> before = pipeline->Stats(1);
  ASSERT_TRUE(before[0].ok() && before[1].ok());
  std::vector<std::unique_ptr<GenerateCall>> calls;
  for (const char* id : {"omni-3", "omni-4"}) {
    calls.push_back(pipeline->StartGenerate(
        MakeRequest(id, "Two at once.", {StageParams(0, 1000, {{"sentences", "40"}})})));
  }
  bool seen_bound[2] = {false, false};
  bool seen_two_on_one = false;
  Eventually(
      [&] {
        absl::StatusOr<v1::PipelineStatus> status = pipeline->Status();
        if (status.ok()) {
          for (int r = 0; r < 2; ++r) {
            seen_bound[r] = seen_bound[r] || BoundRequests(*status, 1, r) == 1;
            seen_two_on_one = seen_two_on_one || BoundRequests(*status, 1, r) > 1;
          }
        }
        return calls[0]->Snapshot().done && calls[1]->Snapshot().done;
      },
      absl::Seconds(30));
  for (auto& call : calls) {
    GenerateResult r = call->Wait(absl::Seconds(30));
    ExpectOneTerminal(r);
    EXPECT_EQ(r.terminal.finish_reason(), v1::FINISH_REASON_STOP) << r.Summary();
    EXPECT_EQ(r.audio.size(), r.text.size() * kCodesPerChar * kBytesPerCode);
  }
  EXPECT_TRUE(seen_bound[0]) << "talker replica 0 never held one of the two requests";
  EXPECT_TRUE(seen_bound[1]) << "talker replica 1 never held one of the two requests";
  EXPECT_FALSE(seen_two_on_one) << "both requests were bound to one talker replica";
  std::vector<absl::StatusOr<WorkerStats>> after = pipeline->Stats(1);
  ASSERT_TRUE(after[0].ok() && after[1].ok());
  EXPECT_GT(after[0]->steps, before[0]->steps) << "talker replica 0 did no work";
  EXPECT_GT(after[1]->steps, before[1]->steps) << "talker replica 1 did no work";
  ExpectPipelineBecomesIdle(*pipeline, absl::Seconds(5));
}

// ---- b. One Abort for many ids -----------------------------------------------------

TEST(PipelineProcessTest, AbortOfManyIdsMakesOneWorkerCallPerReplica) {
  // The vocoder waits for the talker to finish (on_finish), so while the thinker
  // is still writing it holds none of the requests: its count must not move.
  std::unique_ptr<PipelineHarness> pipeline =
      StartPipeline(OmniSpec(/*thinker_step_us=*/10000, "on_finish", "ms_per_code=5"));
  ASSERT_NE(pipeline, nullptr);
  std::vector<std::string> ids;
  std::vector<std::unique_ptr<GenerateCall>> calls;
  for (int i = 0; i < 6; ++i) {
    ids.push_back(absl::StrCat("abort-", i));
    calls.push_back(
        pipeline->StartGenerate(LongOmniRequest(ids.back(), absl::StrCat("story ", i))));
  }
  for (auto& call : calls)
    ASSERT_TRUE(call->WaitForOutput(absl::Seconds(20))) << call->Snapshot().Summary();
  // Every request is on the thinker and on a talker (which starts on the first words).
  ASSERT_TRUE(Eventually(
      [&] {
        absl::StatusOr<v1::PipelineStatus> status = pipeline->Status();
        return status.ok() && BoundRequests(*status, 0, 0) == 6 &&
               BoundRequests(*status, 1, 0) + BoundRequests(*status, 1, 1) == 6;
      },
      absl::Seconds(10)));

  absl::StatusOr<std::vector<std::vector<WorkerStats>>> before = pipeline->AllStats();
  ASSERT_TRUE(before.ok()) << before.status();
  // Which replicas hold some of the requests (nothing else runs).
  std::vector<std::vector<bool>> held(before->size());
  for (size_t s = 0; s < before->size(); ++s) {
    for (const WorkerStats& w : (*before)[s]) held[s].push_back(w.running + w.waiting > 0);
  }
  ASSERT_EQ(held, (std::vector<std::vector<bool>>{{true}, {true, true}, {false}}))
      << "the setup should have replicas with and without the requests";

  std::vector<std::string> abort_ids = ids;
  abort_ids.push_back("no-such-request");
  absl::StatusOr<v1::AbortResponse> response = pipeline->Abort(abort_ids);
  ASSERT_TRUE(response.ok()) << response.status();
  ASSERT_EQ(response->results_size(), 7);
  for (int i = 0; i < 7; ++i) {
    EXPECT_EQ(response->results(i).request_id(), abort_ids[i]);
    EXPECT_EQ(response->results(i).outcome(),
              i < 6 ? v1::AbortResult::OUTCOME_ABORTED : v1::AbortResult::OUTCOME_NOT_FOUND)
        << abort_ids[i];
  }
  for (auto& call : calls) {
    GenerateResult r = call->Wait(absl::Seconds(10));
    ExpectOneTerminal(r);
    EXPECT_EQ(r.terminal.finish_reason(), v1::FINISH_REASON_ABORT) << r.Summary();
    // The partial output is the text streamed so far, once, for the text stage.
    ASSERT_EQ(r.terminal.partial_output_size(), 1) << r.Summary();
    const v1::OutputChunk& partial = r.terminal.partial_output(0);
    EXPECT_EQ(partial.stage_id(), 0);
    EXPECT_EQ(partial.modality(), v1::MODALITY_TEXT);
    EXPECT_FALSE(partial.payload().text().text().empty());
    EXPECT_EQ(partial.payload().text().text(), r.text);
  }

  absl::StatusOr<std::vector<std::vector<WorkerStats>>> after = pipeline->AllStats();
  ASSERT_TRUE(after.ok()) << after.status();
  for (size_t s = 0; s < after->size(); ++s) {
    for (size_t r = 0; r < (*after)[s].size(); ++r) {
      EXPECT_EQ((*after)[s][r].abort_calls - (*before)[s][r].abort_calls, held[s][r] ? 1 : 0)
          << "worker Abort calls on stage " << s << " replica " << r;
      // The abort returned only after the engines stopped the requests.
      EXPECT_EQ((*after)[s][r].running, 0) << "stage " << s << " replica " << r;
      EXPECT_EQ((*after)[s][r].waiting, 0) << "stage " << s << " replica " << r;
    }
  }
  absl::StatusOr<v1::PipelineStatus> status = pipeline->Status();
  ASSERT_TRUE(status.ok());
  EXPECT_EQ(status->in_flight_requests(), 0);
  EXPECT_EQ(TotalBound(*status), 0);
}

// ---- d. Client disconnect ------------------------------------------------------------

TEST(PipelineProcessTest, ClientDisconnectAbortsTheRequestOnEveryStage) {
  std::unique_ptr<PipelineHarness> pipeline =
      StartPipeline(OmniSpec(/*thinker_step_us=*/10000, "streaming", "ms_per_code=5"));
  ASSERT_NE(pipeline, nullptr);
  std::unique_ptr<GenerateCall> call =
      pipeline->StartGenerate(LongOmniRequest("leaver", "A long story, please."));
  // Audio has arrived: every stage holds the request.
  ASSERT_TRUE(
      call->WaitUntil([](const GenerateResult& r) { return !r.audio.empty(); }, absl::Seconds(20)))
      << call->Snapshot().Summary();
  absl::StatusOr<std::vector<std::vector<WorkerStats>>> before = pipeline->AllStats();
  ASSERT_TRUE(before.ok()) << before.status();

  call->Cancel();
  GenerateResult r = call->Wait(absl::Seconds(10));
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::CANCELLED) << r.Summary();
  ExpectPipelineBecomesIdle(*pipeline, absl::Seconds(3));

  // Through the same path as Abort: one worker call on each replica that held it.
  absl::StatusOr<std::vector<std::vector<WorkerStats>>> after = pipeline->AllStats();
  ASSERT_TRUE(after.ok()) << after.status();
  auto delta = [&](int s, int r) {
    return (*after)[s][r].abort_calls - (*before)[s][r].abort_calls;
  };
  EXPECT_EQ(delta(0, 0), 1) << "thinker";
  EXPECT_EQ(delta(1, 0) + delta(1, 1), 1) << "talkers";
  EXPECT_EQ(delta(2, 0), 1) << "vocoder";
}

}  // namespace
}  // namespace omnistage
