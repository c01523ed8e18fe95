#include "stage_worker/engines/base/batching_engine.h"

#include <chrono>
#include <memory>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "stage_worker/engines/base/engine_params.h"
#include "stage_worker/engines/testing/engine_harness.h"

namespace omnistage {
namespace {

using engine_testing::Collected;
using engine_testing::EchoEngine;
using engine_testing::MakeRequest;
using engine_testing::MustStep;
using engine_testing::RunToCompletion;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

BatchingOptions Options(int batch_size = 16) {
  BatchingOptions options;
  options.batch_size = batch_size;
  return options;
}

std::vector<std::string> Ids(const std::vector<v1::RequestOutput>& outputs) {
  std::vector<std::string> ids;
  for (const auto& output : outputs) ids.push_back(output.request_id());
  return ids;
}

TEST(BatchingOptionsTest, ReadsSharedParameters) {
  EngineParams params(
      "echo",
      {{"batch_size", "4"}, {"step_time_us", "1500"}, {"step_mode", "busy"}, {"max_tokens", "7"}});
  BatchingOptions options = BatchingOptions::Read(&params);
  ASSERT_TRUE(params.Finish().ok());
  EXPECT_EQ(options.batch_size, 4);
  EXPECT_EQ(options.step_time, absl::Microseconds(1500));
  EXPECT_EQ(options.step_mode, BatchingOptions::StepMode::kBusy);
  EXPECT_EQ(options.default_max_tokens, 7u);
}

TEST(BatchingOptionsTest, AbsentKeysKeepTheEnginesDefaults) {
  BatchingOptions defaults;
  defaults.batch_size = 3;
  EngineParams absent("echo", {});
  EXPECT_EQ(BatchingOptions::Read(&absent, defaults).batch_size, 3);
  EngineParams given("echo", {{"batch_size", "5"}});
  EXPECT_EQ(BatchingOptions::Read(&given, defaults).batch_size, 5);
}

// The fault and benchmark hooks belong to the registry's decorator
// (fault_injection.h), not to the engines.
TEST(BatchingOptionsTest, KnowsNoFaultHooks) {
  for (const char* key : {"fail_at_step", "crash_at_step", "hang_at_step", "fail_utilities",
                          "stamp_outputs", "test_utilities"}) {
    EngineParams params("echo", {{key, "1"}});
    BatchingOptions::Read(&params);
    EXPECT_THAT(std::string(params.Finish().message()),
                HasSubstr(absl::StrCat("unknown parameter '", key, "'")));
  }
}

TEST(BatchingEngineTest, ThirdRequestStartsWhenASlotFrees) {
  EchoEngine engine(Options(/*batch_size=*/2));
  EXPECT_EQ(engine.capacity(), 2);
  ASSERT_TRUE(engine.Add(MakeRequest("a", {TextPayload("x")})).ok());
  ASSERT_TRUE(engine.Add(MakeRequest("b", {TextPayload("xyz")})).ok());
  ASSERT_TRUE(engine.Add(MakeRequest("c", {TextPayload("xy")})).ok());

  std::vector<v1::RequestOutput> step1 = MustStep(&engine);
  EXPECT_THAT(Ids(step1), ElementsAre("a", "b"));
  for (const auto& output : step1) {
    ASSERT_EQ(output.payloads_size(), 1);  // one token per running request
    EXPECT_EQ(output.payloads(0).text().text().size(), 1u);
  }
  EXPECT_TRUE(step1[0].finished());
  EXPECT_EQ(step1[0].finish_reason(), v1::FINISH_REASON_STOP);
  EXPECT_FALSE(step1[1].finished());

  EXPECT_THAT(Ids(MustStep(&engine)), ElementsAre("b", "c"));
  EXPECT_THAT(Ids(MustStep(&engine)), ElementsAre("b", "c"));
  EXPECT_FALSE(engine.HasWork());
}

TEST(BatchingEngineTest, WaitingRequestsShowInStats) {
  EchoEngine engine(Options(/*batch_size=*/1));
  ASSERT_TRUE(engine.Add(MakeRequest("a", {TextPayload("xx")})).ok());
  ASSERT_TRUE(engine.Add(MakeRequest("b", {TextPayload("xx")})).ok());
  MustStep(&engine);
  absl::StatusOr<google::protobuf::Value> stats = engine.Utility("stats", {});
  ASSERT_TRUE(stats.ok());
  const auto& fields = stats->struct_value().fields();
  EXPECT_EQ(fields.at("running").number_value(), 1);
  EXPECT_EQ(fields.at("waiting").number_value(), 1);
  EXPECT_EQ(fields.at("steps").number_value(), 1);
}

TEST(BatchingEngineTest, StreamedInputRunsAsItArrives) {
  EchoEngine engine(Options());
  ASSERT_TRUE(engine.Add(MakeRequest("a", {}, /*input_complete=*/false)).ok());
  EXPECT_FALSE(engine.HasWork());  // nothing to do until input arrives

  ASSERT_TRUE(engine.AppendInput("a", {TextPayload("hi")}, false).ok());
  EXPECT_TRUE(engine.HasWork());
  EXPECT_EQ(MustStep(&engine)[0].payloads(0).text().text(), "h");
  EXPECT_EQ(MustStep(&engine)[0].payloads(0).text().text(), "i");
  EXPECT_FALSE(engine.HasWork());  // waiting for more input

  ASSERT_TRUE(engine.AppendInput("a", {}, /*last=*/true).ok());
  EXPECT_TRUE(engine.HasWork());
  std::vector<v1::RequestOutput> last = MustStep(&engine);
  ASSERT_EQ(last.size(), 1u);
  EXPECT_EQ(last[0].payloads_size(), 0);
  EXPECT_TRUE(last[0].finished());
  EXPECT_EQ(last[0].finish_reason(), v1::FINISH_REASON_STOP);
  EXPECT_FALSE(engine.HasWork());
}

TEST(BatchingEngineTest, AbortStopsRunningAndWaitingRequests) {
  EchoEngine engine(Options(/*batch_size=*/1));
  ASSERT_TRUE(engine.Add(MakeRequest("a", {TextPayload("xxx")})).ok());
  ASSERT_TRUE(engine.Add(MakeRequest("b", {TextPayload("xxx")})).ok());
  ASSERT_TRUE(engine.Add(MakeRequest("c", {TextPayload("xxx")})).ok());
  EXPECT_THAT(Ids(MustStep(&engine)), ElementsAre("a"));

  engine.Abort({"a", "b", "unknown"});
  ASSERT_TRUE(engine.AppendInput("a", {TextPayload("more")}, true).ok());  // ignored
  std::map<std::string, Collected> out = RunToCompletion(&engine);
  EXPECT_EQ(out.count("a"), 0u);
  EXPECT_EQ(out.count("b"), 0u);
  EXPECT_EQ(out["c"].text, "xxx");
  engine.Abort({"c"});  // already finished: fine
}

TEST(BatchingEngineTest, AbortRightAfterAddProducesNothing) {
  EchoEngine engine(Options());
  ASSERT_TRUE(engine.Add(MakeRequest("a", {TextPayload("x")})).ok());
  engine.Abort({"a"});
  EXPECT_FALSE(engine.HasWork());
  EXPECT_TRUE(MustStep(&engine).empty());
}

TEST(BatchingEngineTest, DuplicateIdIsAnError) {
  EchoEngine engine(Options());
  ASSERT_TRUE(engine.Add(MakeRequest("a", {TextPayload("x")})).ok());
  EXPECT_EQ(engine.Add(MakeRequest("a", {TextPayload("x")})).code(),
            absl::StatusCode::kAlreadyExists);
}

TEST(BatchingEngineTest, BadStreamedInputFailsOnlyThatRequest) {
  EchoEngine engine(Options());
  ASSERT_TRUE(engine.Add(MakeRequest("bad", {}, false)).ok());
  ASSERT_TRUE(engine.Add(MakeRequest("late", {TextPayload("x")}, true)).ok());
  ASSERT_TRUE(engine.Add(MakeRequest("good", {TextPayload("ok")})).ok());
  ASSERT_TRUE(engine.AppendInput("bad", {TokensPayload({1})}, true).ok());
  ASSERT_TRUE(engine.AppendInput("late", {TextPayload("y")}, true).ok());

  std::vector<v1::RequestOutput> step = MustStep(&engine);
  ASSERT_GE(step.size(), 2u);
  EXPECT_EQ(step[0].request_id(), "bad");
  EXPECT_EQ(step[0].finish_reason(), v1::FINISH_REASON_ERROR);
  EXPECT_THAT(step[0].error().message(), HasSubstr("is tokens"));
  EXPECT_EQ(step[1].request_id(), "late");
  EXPECT_EQ(step[1].finish_reason(), v1::FINISH_REASON_ERROR);
  EXPECT_THAT(step[1].error().message(), HasSubstr("after its input was complete"));

  std::map<std::string, Collected> out = RunToCompletion(&engine);
  EXPECT_EQ(out["good"].text, "k");  // "o" came in the first step
  EXPECT_EQ(out.count("bad"), 0u);
}

// An engine that reads its payloads in order across kinds: text as it is,
// audio as "<N bytes>"; audio of an odd byte count is refused.
class OrderedEngine : public BatchingEngine {
 public:
  OrderedEngine() : BatchingEngine("ordered", {v1::Payload::kText, v1::Payload::kAudio}, {}) {}

 protected:
  class Generator : public RequestGenerator {
   public:
    bool TakePayload(const v1::Payload& payload) override {
      pending_ += payload.has_text() ? payload.text().text()
                                     : absl::StrCat("<", payload.audio().pcm_s16le().size(), ">");
      return true;
    }
    bool Ready(const RequestInput& input) const override {
      return !pending_.empty() || input.complete;
    }
    GeneratedStep Step(const RequestInput& input) override {
      GeneratedStep step;
      EXPECT_TRUE(input.text.empty());  // taken by the generator
      if (!pending_.empty()) step.payloads.push_back(TextPayload(std::move(pending_)));
      pending_.clear();
      if (input.complete) step.finish_reason = v1::FINISH_REASON_STOP;
      return step;
    }

   private:
    std::string pending_;
  };

  std::unique_ptr<RequestGenerator> NewGenerator(const RequestSettings&) const override {
    return std::make_unique<Generator>();
  }
  absl::Status CheckPayload(const v1::Payload& payload) const override {
    if (payload.has_audio() && payload.audio().pcm_s16le().size() % 2 != 0) {
      return absl::InvalidArgumentError("odd byte count");
    }
    return absl::OkStatus();
  }
};

v1::Payload Audio(size_t bytes) {
  v1::Payload payload;
  payload.mutable_audio()->set_pcm_s16le(std::string(bytes, '\0'));
  return payload;
}

TEST(BatchingEngineTest, GeneratorTakesPayloadsInOrderAcrossKinds) {
  OrderedEngine engine;
  ASSERT_TRUE(engine.Add(MakeRequest("a", {TextPayload("hi "), Audio(4)}, false)).ok());
  ASSERT_TRUE(engine.AppendInput("a", {TextPayload(" and "), Audio(6)}, true).ok());
  std::map<std::string, Collected> out = RunToCompletion(&engine);
  EXPECT_EQ(out["a"].text, "hi <4> and <6>");
  EXPECT_EQ(out["a"].finish_reason, v1::FINISH_REASON_STOP);
}

TEST(BatchingEngineTest, CheckPayloadRefusesARequestOrFailsOnlyItsStream) {
  OrderedEngine engine;
  absl::Status refused = engine.Validate(MakeRequest("a", {Audio(2), Audio(3)}));
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(refused.message(), "engine ordered: input payload 1: odd byte count");

  ASSERT_TRUE(engine.Add(MakeRequest("bad", {}, false)).ok());
  ASSERT_TRUE(engine.Add(MakeRequest("good", {Audio(2)}, false)).ok());
  ASSERT_TRUE(engine.AppendInput("bad", {Audio(5)}, true).ok());
  ASSERT_TRUE(engine.AppendInput("good", {Audio(8)}, true).ok());
  std::map<std::string, Collected> out = RunToCompletion(&engine);
  EXPECT_EQ(out["bad"].finish_reason, v1::FINISH_REASON_ERROR);
  EXPECT_EQ(out["bad"].error_code, static_cast<int>(absl::StatusCode::kInvalidArgument));
  EXPECT_EQ(out["good"].text, "<2><8>");
  EXPECT_EQ(out["good"].finish_reason, v1::FINISH_REASON_STOP);
}

TEST(BatchingEngineTest, Utilities) {
  EchoEngine engine(Options());
  EXPECT_EQ(engine.Utility("ping", {})->string_value(), "pong");
  absl::StatusOr<google::protobuf::Value> unknown = engine.Utility("div", {});
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(unknown.status().message(), "engine echo: unknown utility 'div' (known: ping, stats)");
}

TEST(BatchingEngineTest, ValidateRejectsBadRequests) {
  EchoEngine engine(Options());
  auto message = [&](const EngineRequest& request) {
    return std::string(engine.Validate(request).message());
  };
  EXPECT_TRUE(engine.Validate(MakeRequest("a", {TextPayload("x")}, true, 5)).ok());
  EXPECT_TRUE(engine.Validate(MakeRequest("a", {}, true, 1000000)).ok());
  EXPECT_EQ(message(MakeRequest("a", {}, true, 0)),
            "engine echo: max_tokens must be in [1, 1000000], got 0");
  EXPECT_THAT(message(MakeRequest("a", {}, true, 1000001)), HasSubstr("got 1000001"));
  EXPECT_EQ(message(MakeRequest("a", {TextPayload("x"), TokensPayload({1})})),
            "engine echo: input payload 1 is tokens, but this engine accepts text");
  EXPECT_THAT(message(MakeRequest("a", {v1::Payload()})), HasSubstr("is empty"));
  EXPECT_THAT(message(MakeRequest("", {})), HasSubstr("empty request id"));

  EngineRequest extra = MakeRequest("a", {});
  (*extra.params.mutable_extra())["top_k"] = "5";
  EXPECT_EQ(engine.Validate(extra).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(message(extra), "engine echo: unknown extra parameter 'top_k' (known: later_piece_steps)");
}

TEST(BatchingEngineTest, DefaultMaxTokensApplies) {
  BatchingOptions options = Options();
  options.default_max_tokens = 2;
  EchoEngine engine(options);
  ASSERT_TRUE(engine.Add(MakeRequest("a", {TextPayload("xxxx")})).ok());
  std::map<std::string, Collected> out = RunToCompletion(&engine);
  EXPECT_EQ(out["a"].text, "xx");
  EXPECT_EQ(out["a"].finish_reason, v1::FINISH_REASON_LENGTH);
}

// Real time is the thing under test here; the bounds are generous.
double StepMillis(BatchingOptions::StepMode mode) {
  BatchingOptions options = Options();
  options.step_time = absl::Milliseconds(3);
  options.step_mode = mode;
  EchoEngine engine(options);
  EXPECT_TRUE(engine.Add(MakeRequest("a", {TextPayload("x")})).ok());
  auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(engine.Step().ok());
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

TEST(BatchingEngineTest, StepTakesAtLeastStepTime) {
  EXPECT_GE(StepMillis(BatchingOptions::StepMode::kBusy), 3.0);
  EXPECT_GE(StepMillis(BatchingOptions::StepMode::kSleep), 3.0);
  EXPECT_LT(StepMillis(BatchingOptions::StepMode::kBusy), 2000.0);
}

// Each request the step runs adds step_us_per_request (real time: only the
// lower bound is checked).
TEST(BatchingEngineTest, AStepGrowsWithTheRequestsItRuns) {
  EngineParams params("echo", {{"step_us_per_request", "20ms"}});
  BatchingOptions options = BatchingOptions::Read(&params, Options());
  ASSERT_TRUE(params.Finish().ok());
  EXPECT_EQ(options.step_per_request, absl::Milliseconds(20));
  EchoEngine engine(options);
  for (const char* id : {"a", "b", "c"}) {
    ASSERT_TRUE(engine.Add(MakeRequest(id, {TextPayload("xyz")})).ok());
  }
  auto timed = [&engine] {
    const auto start = std::chrono::steady_clock::now();
    EXPECT_TRUE(engine.Step().ok());
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
        .count();
  };
  EXPECT_GE(timed(), 60.0);  // Three requests.
  EngineParams out_of_range("echo", {{"step_us_per_request", "2s"}});
  BatchingOptions::Read(&out_of_range);
  EXPECT_FALSE(out_of_range.Finish().ok());
}

}  // namespace
}  // namespace omnistage
