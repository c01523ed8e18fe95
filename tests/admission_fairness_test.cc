// The admission queue between real processes: one stage-0 replica with 8 batch
// slots and 10 ms steps, one identity flooding it with 64 requests of 60 steps,
// another sending short requests one after another. Without the queue the
// quiet identity's requests wait in the worker behind the flood's whole backlog
// (64 / 8 x 0.6 s, about 5 s); with it each waits for about one slot's
// turnaround. Every request of both ends whole. A request of a higher priority
// leaves the queue before its own identity's earlier ones; a full queue refuses
// with a hint of when to retry.
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

  // Restarts the pipeline with these `limits:` entries; `engine_params` are
  // added to the engine's.
  void Start(std::vector<std::string> limits, const std::string& engine_params = "") {
    pipeline_.reset();
    const std::string tokens = TestDir() + "/tokens.yaml";
    // The quiet identity may ask for a higher priority than it gets by default.
    std::ofstream(tokens) << "tokens:\n"
                          << "  - identity: flood\n    role: user\n    token: \"" << kFlood
                          << "\"\n"
                          << "  - identity: quiet\n    role: admin\n    token: \"" << kQuiet
                          << "\"\n    max_priority: 5\n";
    PipelineSpec spec;
    spec.stages = {Stage("llm", "sim_llm",
                         absl::StrCat("step_time_us=10000,batch_size=8",
                                      engine_params.empty() ? "" : ",", engine_params),
                         1, true, "tokens")};
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

  // Holds all 10 slots (8 and a headroom of 2) with long requests of the
  // flood identity, until the queue has been filled, also on a loaded machine.
  std::vector<std::unique_ptr<GenerateCall>> HoldEverySlot(uint32_t tokens) {
    std::vector<std::unique_ptr<GenerateCall>> held;
    for (int i = 0; i < 10; ++i) held.push_back(Call(absl::StrCat("held-", i), tokens, kFlood));
    EXPECT_TRUE(Eventually(
        [&] {
          absl::StatusOr<v1::PipelineStatus> status = pipeline_->Status();
          return status.ok() && TotalBound(*status) == 10;
        },
        absl::Seconds(10)));
    return held;
  }

  static GenerateResult ExpectWhole(GenerateCall& call, size_t tokens) {
    GenerateResult result = call.Wait(absl::Seconds(60));
    ExpectOneTerminal(result);
    EXPECT_EQ(result.terminal.finish_reason(), v1::FINISH_REASON_LENGTH) << result.Summary();
    EXPECT_EQ(result.tokens.size(), tokens) << result.Summary();
    return result;
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
  // Every output carries the time the worker's step produced it, so the order
  // in which requests ran is read from the worker, not from when this process
  // happened to read each stream.
  Start({}, "stamp_outputs=true");
  ASSERT_NE(pipeline_, nullptr);
  // 5 s each: nothing leaves the queue before everything below is in it.
  constexpr uint32_t kHeldTokens = 500;
  std::vector<std::unique_ptr<GenerateCall>> held = HoldEverySlot(kHeldTokens);
  // Ten requests at the quiet identity's default priority wait first ...
  std::vector<std::unique_ptr<GenerateCall>> normal;
  for (int i = 0; i < 10; ++i) normal.push_back(Call(absl::StrCat("normal-", i), 2, kQuiet));
  ASSERT_EQ(WaitQueued("quiet", 10), 10);
  // ... then one of a higher priority comes, while the slots are still held.
  std::unique_ptr<GenerateCall> urgent = Call("urgent", 2, kQuiet, /*priority=*/5);
  ASSERT_EQ(WaitQueued("quiet", 11), 11) << "the held slots freed before the test was ready";
  const GenerateResult urgent_result = ExpectWhole(*urgent, 2);
  ASSERT_FALSE(urgent_result.stamps.empty());
  // It overtook its own identity's earlier requests: its first output came in
  // a step no later than any of theirs (at one priority all ten would have
  // gone first, FIFO within an identity).
  int ran_before = 0;
  for (auto& call : normal) {
    const GenerateResult result = ExpectWhole(*call, 2);
    ASSERT_FALSE(result.stamps.empty()) << result.Summary();
    if (result.stamps.front() < urgent_result.stamps.front()) ++ran_before;
  }
  EXPECT_EQ(ran_before, 0) << "of the 10 earlier requests ran before the urgent one";
  for (auto& call : held) ExpectWhole(*call, kHeldTokens);
}

TEST_F(AdmissionFairnessTest, AFullQueueRefusesWithAHintOfWhenToRetry) {
  Start({"max_queued: 4"});
  ASSERT_NE(pipeline_, nullptr);
  // 10 slots held, 4 queued; 3 s each.
  constexpr uint32_t kHeldTokens = 300;
  std::vector<std::unique_ptr<GenerateCall>> running = HoldEverySlot(kHeldTokens);
  for (int i = 0; i < 4; ++i) {
    running.push_back(Call(absl::StrCat("queued-", i), kHeldTokens, kFlood));
  }
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
