// The orchestrator's connection limits as real processes:
// streams per connection, keepalive enforcement, connection age. Each holds
// back only the connection that goes past it.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/pipeline_harness.h"
#include "tests/pipeline_test_util.h"

namespace omnistage {
namespace {

// One stage producing a token every `step_us`.
PipelineSpec Slow(int step_us, std::vector<std::string> limits) {
  PipelineSpec spec;
  spec.stages = {Stage("llm", "sim_llm", absl::StrCat("step_time_us=", step_us), 1, true,
                       "tokens")};
  spec.limits = std::move(limits);
  return spec;
}

std::shared_ptr<v1::Orchestrator::Stub> StubOn(std::shared_ptr<grpc::Channel> channel) {
  return v1::Orchestrator::NewStub(std::move(channel));
}

int InFlight(PipelineHarness& pipeline) {
  absl::StatusOr<v1::PipelineStatus> status = pipeline.Status();
  return status.ok() ? static_cast<int>(status->in_flight_requests()) : -1;
}

TEST(ConnectionLimitsTest, StreamsBeyondTheLimitOfOneConnectionWait) {
  std::unique_ptr<PipelineHarness> pipeline =
      StartPipeline(Slow(2000, {"max_streams_per_connection: 2"}));
  ASSERT_NE(pipeline, nullptr);
  // A connection of its own (channels with the same arguments share one).
  grpc::ChannelArguments own;
  own.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  auto one_connection = StubOn(grpc::CreateCustomChannel(
      absl::StrCat("127.0.0.1:", pipeline->orchestrator_port()),
      grpc::InsecureChannelCredentials(), own));
  std::vector<std::unique_ptr<GenerateCall>> calls;
  for (int i = 0; i < 4; ++i) {
    calls.push_back(std::make_unique<GenerateCall>(
        one_connection, MakeRequest(absl::StrCat("s", i), "go", {StageParams(0, 100000)}),
        absl::Seconds(60)));
  }
  // Which two of the four get the connection's streams is up to the client.
  auto streaming = [&calls] {
    int n = 0;
    for (auto& call : calls) n += call->Snapshot().output_chunks > 0 ? 1 : 0;
    return n;
  };
  ASSERT_TRUE(Eventually([&] { return streaming() == 2; }, absl::Seconds(20)));
  absl::SleepFor(absl::Milliseconds(500));
  EXPECT_EQ(streaming(), 2);
  EXPECT_EQ(InFlight(*pipeline), 2) << "a third stream ran on the connection";
  // Another connection is not held back.
  ExpectOneTerminal(pipeline->Generate(MakeRequest("other", "go", {StageParams(0, 3)})));
  // As streams end, the waiting ones start.
  std::vector<std::string> first;
  for (int i = 0; i < 4; ++i) {
    if (calls[i]->Snapshot().output_chunks > 0) first.push_back(absl::StrCat("s", i));
  }
  ASSERT_TRUE(pipeline->Abort(first).ok());
  for (auto& call : calls) ASSERT_TRUE(call->WaitForOutput(absl::Seconds(20)));
  ASSERT_TRUE(pipeline->Abort({"s0", "s1", "s2", "s3"}).ok());
  for (auto& call : calls) ExpectOneTerminal(call->Wait(absl::Seconds(10)));
}

TEST(ConnectionLimitsTest, AClientPingingTooOftenIsCutOffAndItsRequestStopped) {
  // A token every 8 s: the stream carries almost no data, so pings are what
  // the connection mostly carries. The default limit: one ping per 5 s.
  std::unique_ptr<PipelineHarness> pipeline = StartPipeline(Slow(8000000, {}));
  ASSERT_NE(pipeline, nullptr);
  // Pings every second (the most a gRPC C++ client sends), data or not.
  grpc::ChannelArguments pings;
  pings.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 1000);
  pings.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 1000);
  pings.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  pings.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  pings.SetInt(GRPC_ARG_HTTP2_MIN_SENT_PING_INTERVAL_WITHOUT_DATA_MS, 1000);
  pings.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  auto abusive = StubOn(grpc::CreateCustomChannel(
      absl::StrCat("127.0.0.1:", pipeline->orchestrator_port()),
      grpc::InsecureChannelCredentials(), pings));
  GenerateCall flood(abusive, MakeRequest("flood", "go", {StageParams(0, 100000)}),
                     absl::Seconds(60));
  std::unique_ptr<GenerateCall> polite =
      pipeline->StartGenerate(MakeRequest("polite", "go", {StageParams(0, 100000)}));
  const GenerateResult cut = flood.Wait(absl::Seconds(20));
  EXPECT_EQ(cut.status.error_code(), grpc::StatusCode::UNAVAILABLE) << cut.Summary();
  EXPECT_EQ(cut.status.error_message(), "Too many pings");
  // Its request is stopped everywhere (at the end of the worker's 8 s step);
  // the polite client's goes on.
  EXPECT_TRUE(Eventually([&] { return InFlight(*pipeline) == 1; }, absl::Seconds(20)));
  EXPECT_FALSE(polite->Snapshot().done);
  ASSERT_TRUE(pipeline->Abort({"polite"}).ok());
  ExpectOneTerminal(polite->Wait(absl::Seconds(20)));
}

TEST(ConnectionLimitsTest, OldConnectionsAreAskedToGoWhileTheirCallsFinish) {
  std::unique_ptr<PipelineHarness> pipeline = StartPipeline(
      Slow(100000, {"max_connection_age_ms: 1000", "max_connection_age_grace_ms: 30000"}));
  ASSERT_NE(pipeline, nullptr);
  std::shared_ptr<grpc::Channel> channel = pipeline->NewChannel();
  // 30 tokens at 100 ms: runs past the connection's age, within its grace.
  GenerateCall across(StubOn(channel), MakeRequest("across", "go", {StageParams(0, 30)}),
                      absl::Seconds(60));
  const GenerateResult r = across.Wait(absl::Seconds(30));
  ExpectOneTerminal(r);
  EXPECT_EQ(r.terminal.finish_reason(), v1::FINISH_REASON_LENGTH) << r.Summary();
  EXPECT_EQ(r.tokens.size(), 30u);
  // The orchestrator asked the connection to go (GOAWAY): once its call ended
  // the channel let it go, and a new call gets a new connection.
  EXPECT_TRUE(Eventually([&] { return channel->GetState(false) != GRPC_CHANNEL_READY; },
                         absl::Seconds(5)));
  GenerateCall again(StubOn(channel), MakeRequest("again", "go", {StageParams(0, 2)}),
                     absl::Seconds(30));
  ExpectOneTerminal(again.Wait(absl::Seconds(20)));
}

}  // namespace
}  // namespace omnistage
