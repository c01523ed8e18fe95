// A client that stops reading must not grow the orchestrator's memory without
// bound: past limits.max_client_queued_bytes of responses
// queued for it, its call is cancelled and its request stopped on every stage,
// while a client reading the same stream at the same time is unaffected.
#include <fstream>
#include <memory>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/pipeline_harness.h"
#include "tests/pipeline_test_util.h"

namespace omnistage {
namespace {

// VmRSS of `pid` in KiB; 0 if unreadable.
int64_t RssKib(pid_t pid) {
  std::ifstream status(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) {
      int64_t kib = 0;
      std::string digits;
      for (char c : line) {
        if (c >= '0' && c <= '9') digits += c;
      }
      return absl::SimpleAtoi(digits, &kib) ? kib : 0;
    }
  }
  return 0;
}

TEST(SlowClientTest, AClientThatReadsNothingIsStoppedAndMemoryStaysFlat) {
  PipelineSpec spec = OmniSpec(/*thinker_step_us=*/1000);
  spec.max_client_queued_bytes = 1 << 20;
  std::unique_ptr<PipelineHarness> pipeline = StartPipeline(spec);
  ASSERT_NE(pipeline, nullptr);
  const pid_t orchestrator = pipeline->orchestrator()->pid();
  const int64_t before = RssKib(orchestrator);

  // The slow client: opens the stream and reads nothing.
  grpc::ClientContext slow_context;
  std::unique_ptr<grpc::ClientReader<v1::GenerateResponse>> slow =
      pipeline->stub()->Generate(&slow_context, LongOmniRequest("slow", "Never read me"));
  // A well-behaved client at the same time.
  std::unique_ptr<GenerateCall> good =
      pipeline->StartGenerate(LongOmniRequest("good", "Read me"));

  // The slow request is stopped everywhere: nothing of it stays in flight.
  EXPECT_TRUE(Eventually(
      [&] {
        absl::StatusOr<v1::PipelineStatus> status = pipeline->Status();
        return status.ok() && status->in_flight_requests() <= 1 &&
               good->Snapshot().output_chunks > 0;
      },
      absl::Seconds(30)));
  const GenerateResult finished = good->Wait(absl::Seconds(60));
  ExpectOneTerminal(finished);
  EXPECT_EQ(finished.terminal.finish_reason(), v1::FINISH_REASON_STOP) << finished.Summary();
  EXPECT_GT(finished.audio.size(), 1u << 20) << "the good request must outgrow the slow one's bound";
  const int64_t after = RssKib(orchestrator);
  std::cout << "orchestrator RSS " << before << " KiB -> " << after << " KiB; the good client got "
            << finished.audio.size() << " audio bytes" << std::endl;
  // Unbounded, the slow client's queue would hold what the good one received.
  EXPECT_LT(after - before, static_cast<int64_t>(finished.audio.size() / 1024))
      << "memory grew like an unbounded queue";

  // Reading now, the slow client finds its call ended (cancelled by the server).
  v1::GenerateResponse response;
  while (slow->Read(&response)) {
  }
  const grpc::Status status = slow->Finish();
  EXPECT_FALSE(status.ok());
  std::cout << "slow client: " << status.error_code() << " " << status.error_message()
            << std::endl;
  ExpectPipelineBecomesIdle(*pipeline, absl::Seconds(20));
}

}  // namespace
}  // namespace omnistage
