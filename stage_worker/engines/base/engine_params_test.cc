#include "stage_worker/engines/base/engine_params.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace omnistage {
namespace {

using ::testing::HasSubstr;

TEST(EngineParamsTest, AbsentKeysGiveDefaults) {
  EngineParams params("sim_llm", {});
  EXPECT_EQ(params.Int("batch_size", 16, 1, 65536), 16);
  EXPECT_TRUE(params.Bool("fail_utilities", true));
  EXPECT_EQ(params.DurationUs("step_time_us", absl::Microseconds(5), absl::Seconds(1)),
            absl::Microseconds(5));
  EXPECT_EQ(params.Enum("step_mode", "sleep", {"sleep", "busy"}), "sleep");
  EXPECT_EQ(params.Text("model_dir", "/usr/share/model"), "/usr/share/model");
  EXPECT_TRUE(params.Finish().ok());
}

TEST(EngineParamsTest, ParsesValues) {
  EngineParams params("sim_llm", {{"batch_size", "64"},
                                  {"fail_utilities", "true"},
                                  {"a_us", "2000"},
                                  {"b_us", "3ms"},
                                  {"step_mode", "busy"},
                                  {"model_dir", "/opt/model"}});
  EXPECT_EQ(params.Int("batch_size", 16, 1, 65536), 64);
  EXPECT_TRUE(params.Bool("fail_utilities", false));
  EXPECT_EQ(params.DurationUs("a_us", absl::ZeroDuration(), absl::Seconds(1)),
            absl::Milliseconds(2));
  EXPECT_EQ(params.DurationUs("b_us", absl::ZeroDuration(), absl::Seconds(1)),
            absl::Milliseconds(3));
  EXPECT_EQ(params.Enum("step_mode", "sleep", {"sleep", "busy"}), "busy");
  EXPECT_EQ(params.Text("model_dir", "/usr/share/model"), "/opt/model");
  EXPECT_TRUE(params.Finish().ok());
}

TEST(EngineParamsTest, RejectsNonInteger) {
  EngineParams params("sim_llm", {{"batch_size", "abc"}});
  EXPECT_EQ(params.Int("batch_size", 16, 1, 65536), 16);
  absl::Status status = params.Finish();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            "engine sim_llm: parameter batch_size: expected an integer in [1, 65536], "
            "got 'abc'");
}

TEST(EngineParamsTest, RejectsOutOfRangeInteger) {
  EngineParams params("sim_llm", {{"batch_size", "0"}});
  params.Int("batch_size", 16, 1, 65536);
  EXPECT_THAT(params.Finish().message(), HasSubstr("got '0'"));
}

TEST(EngineParamsTest, RejectsBadBoolDurationAndEnum) {
  {
    EngineParams params("talker", {{"fail_utilities", "maybe"}});
    params.Bool("fail_utilities", false);
    EXPECT_EQ(params.Finish().message(),
              "engine talker: parameter fail_utilities: expected a boolean (true or "
              "false), got 'maybe'");
  }
  {
    EngineParams params("talker", {{"step_time_us", "-5"}});
    params.DurationUs("step_time_us", absl::ZeroDuration(), absl::Seconds(60));
    EXPECT_THAT(params.Finish().message(),
                HasSubstr("parameter step_time_us: expected a duration in [0, 60000000]"));
  }
  {
    EngineParams params("talker", {{"step_time_us", "soon"}});
    params.DurationUs("step_time_us", absl::ZeroDuration(), absl::Seconds(60));
    EXPECT_THAT(params.Finish().message(), HasSubstr("got 'soon'"));
  }
  {
    EngineParams params("talker", {{"step_mode", "nap"}});
    params.Enum("step_mode", "sleep", {"sleep", "busy"});
    EXPECT_EQ(params.Finish().message(),
              "engine talker: parameter step_mode: expected one of sleep, busy, got 'nap'");
  }
}

TEST(EngineParamsTest, RejectsUnknownKeysListingKnownOnes) {
  EngineParams params("sim_llm", {{"bach_size", "8"}});
  params.Int("batch_size", 16, 1, 65536);
  params.DurationUs("step_time_us", absl::ZeroDuration(), absl::Seconds(60));
  absl::Status status = params.Finish();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            "engine sim_llm: unknown parameter 'bach_size' (known: batch_size, "
            "step_time_us)");
}

TEST(EngineParamsTest, FirstBadValueWins) {
  EngineParams params("sim_llm", {{"a", "x"}, {"b", "y"}, {"zzz", "1"}});
  params.Int("a", 0, 0, 1);
  params.Int("b", 0, 0, 1);
  EXPECT_THAT(params.Finish().message(), HasSubstr("parameter a:"));
}

TEST(EngineParamsTest, NamesTheKindOfParameter) {
  EngineParams params("thinker", {{"colour", "red"}}, "extra parameter");
  EXPECT_EQ(params.Finish().message(),
            "engine thinker: unknown extra parameter 'colour' (known: none)");
}

}  // namespace
}  // namespace omnistage
