// The relays of //tests/bench:pipeline_benchmark (relay_server.h), run as the
// benchmark runs them, each in front of its baseline server: every response and
// the call's status arrive as the baseline sent them, calls run side by side, a
// client's cancel ends its call and not the relay, and SIGTERM stops the relay
// with a call in flight.
#include <csignal>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/testing/child_process.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "protos/orchestrator.grpc.pb.h"
#include "tests/bench/baseline_server.h"

namespace omnistage {
namespace bench {
namespace {

constexpr char kBenchmark[] = "tests/bench/pipeline_benchmark";

struct RelayKind {
  std::string api;
  int threads;
};

std::string Name(const ::testing::TestParamInfo<RelayKind>& info) {
  return absl::StrCat(info.param.api, info.param.threads);
}

std::unique_ptr<ChildProcess> StartServing(const std::vector<std::string>& argv, int* port) {
  absl::StatusOr<std::unique_ptr<ChildProcess>> process = ChildProcess::Start(argv);
  if (!process.ok()) return nullptr;
  absl::StatusOr<std::string> line = (*process)->WaitForLine("listening port=", absl::Seconds(20));
  if (!line.ok()) return nullptr;
  *port = ListeningLineIn(*line).port;
  return std::move(*process);
}

// The token ids of one call, its finish reason and its status.
struct CallResult {
  std::vector<int> ids;
  int terminals = 0;
  v1::FinishReason reason = v1::FINISH_REASON_UNSPECIFIED;
  grpc::Status status;
};

CallResult Call(v1::Orchestrator::Stub* stub, const v1::GenerateRequest& request) {
  CallResult result;
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
  std::unique_ptr<grpc::ClientReader<v1::GenerateResponse>> reader =
      stub->Generate(&context, request);
  v1::GenerateResponse response;
  while (reader->Read(&response)) {
    for (const v1::OutputChunk& chunk : response.outputs()) {
      for (int id : chunk.payload().tokens().ids()) result.ids.push_back(id);
    }
    if (response.has_terminal()) {
      ++result.terminals;
      result.reason = response.terminal().finish_reason();
    }
  }
  result.status = reader->Finish();
  return result;
}

class RelayTest : public ::testing::TestWithParam<RelayKind> {
 protected:
  void SetUp() override {
    int baseline_port = 0;
    baseline_ = StartServing({kBenchmark, "--serve_baseline"}, &baseline_port);
    ASSERT_NE(baseline_, nullptr);
    int relay_port = 0;
    relay_ = StartServing({kBenchmark, "--serve_relay=" + GetParam().api,
                           absl::StrCat("--relay_upstream=127.0.0.1:", baseline_port),
                           absl::StrCat("--relay_threads=", GetParam().threads)},
                          &relay_port);
    ASSERT_NE(relay_, nullptr);
    stub_ = v1::Orchestrator::NewStub(grpc::CreateChannel(absl::StrCat("127.0.0.1:", relay_port),
                                                          grpc::InsecureChannelCredentials()));
  }

  std::unique_ptr<ChildProcess> baseline_;
  std::unique_ptr<ChildProcess> relay_;
  std::unique_ptr<v1::Orchestrator::Stub> stub_;
};

TEST_P(RelayTest, EveryResponseAndTheStatusArriveForCallsSideBySide) {
  constexpr int kCalls = 16;
  constexpr int kTokens = 300;
  std::vector<CallResult> results(kCalls);
  std::vector<std::thread> clients;
  for (int i = 0; i < kCalls; ++i) {
    clients.emplace_back([this, i, &results] {
      results[i] = Call(stub_.get(), BaselineRequest(absl::StrCat("r", i), kTokens, 0));
    });
  }
  for (std::thread& client : clients) client.join();
  for (int i = 0; i < kCalls; ++i) {
    SCOPED_TRACE(i);
    EXPECT_TRUE(results[i].status.ok()) << results[i].status.error_message();
    ASSERT_EQ(results[i].ids.size(), static_cast<size_t>(kTokens));
    for (int k = 0; k < kTokens; ++k) ASSERT_EQ(results[i].ids[k], k + 1);
    EXPECT_EQ(results[i].terminals, 1);
    EXPECT_EQ(results[i].reason, v1::FINISH_REASON_STOP);
  }
}

TEST_P(RelayTest, ACancelledCallEndsAndTheRelayServesTheNext) {
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReader<v1::GenerateResponse>> reader =
      stub_->Generate(&context, BaselineRequest("slow", 100000, /*pace_us=*/2000));
  v1::GenerateResponse response;
  ASSERT_TRUE(reader->Read(&response));
  ASSERT_TRUE(reader->Read(&response));
  context.TryCancel();
  while (reader->Read(&response)) {
  }
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);

  const CallResult next = Call(stub_.get(), BaselineRequest("next", 5, 0));
  EXPECT_TRUE(next.status.ok()) << next.status.error_message();
  EXPECT_EQ(next.ids.size(), 5u);
  EXPECT_EQ(next.reason, v1::FINISH_REASON_STOP);
}

TEST_P(RelayTest, SigtermStopsItWithACallInFlight) {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
  std::unique_ptr<grpc::ClientReader<v1::GenerateResponse>> reader =
      stub_->Generate(&context, BaselineRequest("long", 100000, /*pace_us=*/2000));
  v1::GenerateResponse response;
  ASSERT_TRUE(reader->Read(&response));
  relay_->Signal(SIGTERM);
  EXPECT_EQ(relay_->Wait(absl::Seconds(10)), 0);
  while (reader->Read(&response)) {
  }
  // Cut by the relay's end, not by the call's deadline (its 100,000 tokens take 200 s).
  const grpc::Status status = reader->Finish();
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << status.error_message();
}

INSTANTIATE_TEST_SUITE_P(Relays, RelayTest,
                         ::testing::Values(RelayKind{"callback", 1}, RelayKind{"async", 1},
                                           RelayKind{"async", 2}),
                         Name);

}  // namespace
}  // namespace bench
}  // namespace omnistage
