// The admission queue between real processes: one stage-0 replica with 8 batch
// slots and 10 ms steps, one identity flooding it with 64 requests of 60 steps,
// another sending short requests one after another. Without the queue the
// quiet identity's requests wait in the worker behind the flood's whole backlog
// (64 / 8 x 0.6 s, about 5 s); with it each waits for about one slot's
// turnaround. Every request of both ends whole. A priority test: a request of
// a higher priority leaves the queue before the flood's.
#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "protos/rpc_status.pb.h"
#include "tests/pipeline_harness.h"
#include "tests/pipeline_test_util.h"

namespace omnistage {
namespace {

constexpr char kFlood[] = "flood-token-0123456789";
constexpr char kQuiet[] = "quiet-token-0123456789";
constexpr int kFloodRequests = 64;
constexpr uint32_t kLongTokens = 60;  // 60 steps of 10 ms
constexpr absl::Duration kLongRequest = absl::Milliseconds(600);

std::string TestDir() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return dir != nullptr ? dir : "/tmp";
}

class AdmissionFairnessTest : public ::testing::Test {
 protected:
  void SetUp() override { Start({}); }

  // Restarts the pipeline with these `limits:` entries.
  void Start(std::vector<std::string> limits) {
    pipeline_.reset();
    const std::string tokens = TestDir() + "/tokens.yaml";
    // The quiet identity may ask for a higher priority than it gets by default.
    std::ofstream(tokens) << "tokens:\n"
                          << "  - identity: flood\n    role: user\n    token: \"" << kFlood
                          << "\"\n"
                          << "  - identity: quiet\n    role: admin\n    token: \"" << kQuiet
                          << "\"\n    max_priority: 5\n";
    PipelineSpec spec;
    spec.stages = {Stage("llm", "sim_llm", "step_time_us=10000,batch_size=8", 1, true, "tokens")};
    spec.orchestrator_flags = {"--tokens_file=" + tokens};
    spec.token = kQuiet;
    spec.limits = std::move(limits);
    pipeline_ = StartPipeline(spec);
  }

  std::unique_ptr<GenerateCall> Call(const std::string& id, uint32_t tokens,
                                     const std::string& token, int priority = -1) {
    v1::GenerateRequest request = MakeRequest(id, "hello", {StageParams(0, tokens)});
    if (priority >= 0) request.set_priority(priority);
    return std::make_unique<GenerateCall>(pipeline_->stub(), std::move(request),
                                          absl::Seconds(60), token);
  }

  std::vector<std::unique_ptr<GenerateCall>> Flood() {
    std::vector<std::unique_ptr<GenerateCall>> flood;
    for (int i = 0; i < kFloodRequests; ++i) {
      flood.push_back(Call(absl::StrCat("flood-", i), kLongTokens, kFlood));
    }
    return flood;
  }

  // Waits (up to 10 s) until `identity` has `n` requests queued; returns how
  // many it has then.
  int WaitQueued(const std::string& identity, int n) {
    int waiting = 0;
    for (const absl::Time deadline = absl::Now() + absl::Seconds(10);
         waiting < n && absl::Now() < deadline; absl::SleepFor(absl::Milliseconds(10))) {
      absl::StatusOr<v1::PipelineStatus> status = pipeline_->Status();
      waiting = 0;
      if (!status.ok()) continue;
      for (const v1::QueuedRequests& queued : status->queued()) {
        if (queued.identity() == identity) waiting += queued.waiting();
      }
    }
    return waiting;
  }

  static void ExpectWhole(GenerateCall& call, size_t tokens) {
    GenerateResult result = call.Wait(absl::Seconds(60));
    ExpectOneTerminal(result);
    EXPECT_EQ(result.terminal.finish_reason(), v1::FINISH_REASON_LENGTH) << result.Summary();
    EXPECT_EQ(result.tokens.size(), tokens) << result.Summary();
  }

  std::unique_ptr<PipelineHarness> pipeline_;
};

TEST_F(AdmissionFairnessTest, AQuietIdentityIsServedWithinASlotsTurnaroundDuringAFlood) {
  ASSERT_NE(pipeline_, nullptr);
  const absl::Time flood_start = absl::Now();
  std::vector<std::unique_ptr<GenerateCall>> flood = Flood();
  // Once the flood holds every slot and its backlog waits:
  ASSERT_TRUE(flood[0]->WaitForOutput(absl::Seconds(10)));
  std::vector<absl::Duration> waits;
  for (int i = 0; i < 10; ++i) {
    const absl::Time start = absl::Now();
    std::unique_ptr<GenerateCall> quiet = Call(absl::StrCat("quiet-", i), 2, kQuiet);
    ASSERT_TRUE(quiet->WaitForOutput(absl::Seconds(30))) << "quiet request " << i;
    waits.push_back(absl::Now() - start);
    ExpectWhole(*quiet, 2);
  }
  for (auto& call : flood) ExpectWhole(*call, kLongTokens);
  const absl::Duration flood_took = absl::Now() - flood_start;
  std::sort(waits.begin(), waits.end());
  const absl::Duration p90 = waits[8];
  std::cout << "quiet time to first output: p50 " << waits[5] << ", p90 " << p90 << ", max "
            << waits.back() << "; the flood of " << kFloodRequests << " took " << flood_took
            << " (ideal " << kLongRequest * (kFloodRequests / 8) << ")\n";
  EXPECT_LE(p90, 2 * kLongRequest);
}

TEST_F(AdmissionFairnessTest, AHigherPriorityLeavesTheQueueFirst) {
  ASSERT_NE(pipeline_, nullptr);
  std::vector<std::unique_ptr<GenerateCall>> flood = Flood();
  ASSERT_TRUE(flood[0]->WaitForOutput(absl::Seconds(10)));
  // Behind 54 queued flood requests, and behind the quiet identity's other
  // requests at its default priority.
  std::vector<std::unique_ptr<GenerateCall>> normal;
  for (int i = 0; i < 10; ++i) normal.push_back(Call(absl::StrCat("normal-", i), 2, kQuiet));
  // All ten wait before the urgent one comes (at most one may have left).
  ASSERT_GE(WaitQueued("quiet", 9), 9);
  const absl::Time start = absl::Now();
  std::unique_ptr<GenerateCall> urgent = Call("urgent", 2, kQuiet, /*priority=*/5);
  ASSERT_TRUE(urgent->WaitForOutput(absl::Seconds(30)));
  const absl::Duration urgent_wait = absl::Now() - start;
  // It overtook its own identity's earlier requests (at its own priority all
  // ten would have gone first): only those already sent may have ended.
  int normal_done_first = 0;
  for (auto& call : normal) normal_done_first += call->Snapshot().terminals;
  std::cout << "urgent time to first output " << urgent_wait << "; " << normal_done_first
            << " of the 10 earlier ones had ended\n";
  EXPECT_LE(urgent_wait, 2 * kLongRequest);
  EXPECT_LE(normal_done_first, 2);
  ExpectWhole(*urgent, 2);
  for (auto& call : normal) ExpectWhole(*call, 2);
  for (auto& call : flood) ExpectWhole(*call, kLongTokens);
}

TEST_F(AdmissionFairnessTest, AFullQueueRefusesWithAHintOfWhenToRetry) {
  Start({"max_queued: 4"});
  ASSERT_NE(pipeline_, nullptr);
  // 10 slots (8 and a headroom of 2), 4 queued; 3 s each, so that they are
  // all in before the first ones end, also on a loaded machine.
  constexpr uint32_t kHeldTokens = 300;
  std::vector<std::unique_ptr<GenerateCall>> running;
  for (int i = 0; i < 14; ++i) {
    running.push_back(Call(absl::StrCat("held-", i), kHeldTokens, kFlood));
  }
  ASSERT_TRUE(running[0]->WaitForOutput(absl::Seconds(10)));
  // Once all 14 have arrived: 4 wait.
  ASSERT_EQ(WaitQueued("flood", 4), 4);
  grpc::ClientContext context;
  context.AddMetadata("authorization", absl::StrCat("Bearer ", kFlood));
  std::unique_ptr<grpc::ClientReader<v1::GenerateResponse>> reader =
      pipeline_->stub()->Generate(&context, MakeRequest("refused", "hello", {StageParams(0, 2)}));
  v1::GenerateResponse response;
  while (reader->Read(&response)) {
  }
  const grpc::Status status = reader->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << status.error_message();
  EXPECT_NE(status.error_message().find("admission queue is full"), std::string::npos);
  google::rpc::Status details;
  ASSERT_TRUE(details.ParseFromString(status.error_details()));
  google::rpc::RetryInfo retry;
  ASSERT_EQ(details.details_size(), 1);
  ASSERT_TRUE(details.details(0).UnpackTo(&retry));
  EXPECT_EQ(retry.retry_delay().seconds(), 1);
  const auto& trailers = context.GetServerTrailingMetadata();
  auto hint = trailers.find("retry-after-ms");
  ASSERT_NE(hint, trailers.end());
  EXPECT_EQ(std::string(hint->second.data(), hint->second.size()), "1000");
  for (auto& call : running) ExpectWhole(*call, kHeldTokens);
}

}  // namespace
}  // namespace omnistage
