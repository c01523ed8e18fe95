// Log lines as they reach stderr: the text form with its fields, the JSON form
// (parsed back), escaping, levels below the threshold dropped, and W3C
// traceparent parsing.
#include "common/log.h"

#include <stdio.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"

namespace omnistage {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::MatchesRegex;
using ::testing::SizeIs;

// Where CaptureStderr sends stderr.
std::string CapturePath() {
  const char* tmp = getenv("TEST_TMPDIR");
  return std::string(tmp != nullptr ? tmp : "/tmp") + "/stderr.txt";
}

// What reached the capture file so far.
std::string Written() {
  std::ifstream in(CapturePath());
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Runs `log` with stderr sent to a file; returns what it wrote.
template <typename F>
std::string CaptureStderr(F log) {
  const std::string path = CapturePath();
  fflush(stderr);
  const int saved = dup(2);
  FILE* file = fopen(path.c_str(), "w");
  dup2(fileno(file), 2);
  log();
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  fclose(file);
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(LogTest, TextLinesCarryTimeLevelServiceAndFields) {
  InitLogging({"orchestrator", LogFormat::kText, LogLevel::kInfo});
  const std::string out = CaptureStderr([] {
    LogInfo({"req-7", 1, 0, "4bf92f3577b34da6a3ce929d0e0e4736"}, "failed: worker exited");
    LogWarning("plain");
  });
  const std::vector<std::string> lines = absl::StrSplit(out, '\n', absl::SkipEmpty());
  ASSERT_THAT(lines, SizeIs(2));
  EXPECT_THAT(lines[0], MatchesRegex("[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\."
                                     "[0-9]{6}Z info orchestrator request=req-7 stage=1 "
                                     "replica=0 trace=4bf92f3577b34da6a3ce929d0e0e4736 "
                                     "failed: worker exited"));
  EXPECT_THAT(lines[1], HasSubstr(" warning orchestrator plain"));
}

TEST(LogTest, JsonLinesParseBackWithEveryField) {
  InitLogging({"stage_worker", LogFormat::kJson, LogLevel::kInfo});
  const std::string out = CaptureStderr([] {
    LogError({"r\"1\"", 2, 3, ""}, "bad\nthing \\ \x01");
    LogInfo("no fields");
  });
  const std::vector<std::string> lines = absl::StrSplit(out, '\n', absl::SkipEmpty());
  ASSERT_THAT(lines, SizeIs(2));
  google::protobuf::Struct line;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(lines[0], &line).ok()) << lines[0];
  const auto& f = line.fields();
  EXPECT_EQ(f.at("level").string_value(), "error");
  EXPECT_EQ(f.at("service").string_value(), "stage_worker");
  EXPECT_EQ(f.at("request_id").string_value(), "r\"1\"");
  EXPECT_EQ(f.at("stage").number_value(), 2);
  EXPECT_EQ(f.at("replica").number_value(), 3);
  EXPECT_EQ(f.at("msg").string_value(), "bad\nthing \\ \x01");
  EXPECT_EQ(f.count("trace_id"), 0u);
  EXPECT_THAT(f.at("ts").string_value(), MatchesRegex(".*T.*Z"));
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(lines[1], &line).ok()) << lines[1];
  EXPECT_EQ(line.fields().count("request_id"), 0u);
}

TEST(LogTest, AWorkersLinesCarryItsInstanceAndSession) {
  InitLogging({"stage_worker", LogFormat::kText, LogLevel::kInfo});
  LogContext context{"req-7", 1, -1, "4bf92f3577b34da6a3ce929d0e0e4736"};
  context.instance = "talker-1-4711-1";
  context.session = 2;
  std::string out = CaptureStderr([&] { LogInfo(context, "added"); });
  EXPECT_THAT(out, HasSubstr(" info stage_worker request=req-7 stage=1 instance=talker-1-4711-1 "
                             "session=2 trace=4bf92f3577b34da6a3ce929d0e0e4736 added\n"));

  InitLogging({"stage_worker", LogFormat::kJson, LogLevel::kInfo});
  out = CaptureStderr([&] { LogInfo(context, "added"); });
  google::protobuf::Struct line;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(out, &line).ok()) << out;
  EXPECT_EQ(line.fields().at("instance").string_value(), "talker-1-4711-1");
  EXPECT_EQ(line.fields().at("session").number_value(), 2);
  EXPECT_EQ(line.fields().count("replica"), 0u);
}

TEST(LogTest, LinesBelowTheLevelAreDropped) {
  InitLogging({"orchestrator", LogFormat::kText, LogLevel::kWarning});
  const std::string out = CaptureStderr([] {
    LogInfo("quiet");
    Log(LogLevel::kDebug, {}, "quieter");
    LogError("loud");
  });
  EXPECT_THAT(out, Not(HasSubstr("quiet")));
  EXPECT_THAT(out, HasSubstr("loud"));
}

// A batch holds its thread's info lines until it ends; a warning writes them,
// and itself, at once. Only the outermost of nested batches writes.
TEST(LogTest, ABatchHoldsInfoLinesUntilItEndsAndAWarningWritesThemAtOnce) {
  InitLogging({"orchestrator", LogFormat::kText, LogLevel::kInfo});
  std::string held, after_warning, after_inner, after_outer;
  const std::string out = CaptureStderr([&] {
    {
      LogBatch batch;
      LogInfo("first");
      {
        LogBatch inner;
        LogInfo("second");
      }
      after_inner = Written();
      LogWarning("third");
      after_warning = Written();
      LogInfo("fourth");
      held = Written();
    }
    after_outer = Written();
    LogInfo("fifth");  // No batch: written at once.
  });
  EXPECT_EQ(after_inner, "") << "an inner batch wrote";
  EXPECT_THAT(after_warning, HasSubstr("first"));
  EXPECT_THAT(after_warning, HasSubstr("second"));
  EXPECT_THAT(after_warning, HasSubstr("warning orchestrator third"));
  EXPECT_THAT(held, Not(HasSubstr("fourth")));
  EXPECT_THAT(after_outer, HasSubstr("fourth"));
  const std::vector<std::string> lines = absl::StrSplit(out, '\n', absl::SkipEmpty());
  ASSERT_THAT(lines, SizeIs(5));
  EXPECT_THAT(lines[0], HasSubstr(" first"));
  EXPECT_THAT(lines[3], HasSubstr(" fourth"));
  EXPECT_THAT(lines[4], HasSubstr(" fifth"));
}

TEST(LogTest, ParsesFlagsValues) {
  EXPECT_EQ(*ParseLogFormat("json"), LogFormat::kJson);
  EXPECT_FALSE(ParseLogFormat("xml").ok());
  EXPECT_EQ(*ParseLogLevel("WARNING"), LogLevel::kWarning);
  EXPECT_FALSE(ParseLogLevel("loud").ok());
}

}  // namespace
}  // namespace omnistage
