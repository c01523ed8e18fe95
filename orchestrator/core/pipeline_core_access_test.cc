// The record of every request that ends (finished_requests.h) through the
// core: a finished, a failed and an aborted request each get exactly one
// access line and one entry in Status().recent, naming the stages, replicas
// and instances it ran on and what its client got, on the manual clock; a
// refused call gets none; --access_log=false leaves the lines out but not the
// records.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "orchestrator/core/pipeline_core.h"
#include "orchestrator/core/testing/pipeline_core_harness.h"

namespace omnistage {
namespace pipeline_core_test {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;

// The access lines in `logged`.
std::vector<std::string> AccessLines(const std::string& logged) {
  std::vector<std::string> lines;
  for (absl::string_view line : absl::StrSplit(logged, '\n')) {
    if (absl::StrContains(line, " access ")) lines.emplace_back(line);
  }
  return lines;
}

// "stage:replica@instance" of each stage a record ran on.
std::vector<std::string> Ran(const v1::FinishedRequest& record) {
  std::vector<std::string> out;
  for (const v1::StageReplica& s : record.stages()) {
    out.push_back(absl::StrCat(s.stage_id(), ":", s.replica(), "@", s.instance_id()));
  }
  return out;
}

class PipelineCoreAccessTest : public PipelineCoreTest {
 protected:
  void SetUp() override { InitLogging({"orchestrator", LogFormat::kText, LogLevel::kInfo}); }
};

TEST_F(PipelineCoreAccessTest, FinishedFailedAndAbortedRequestsEachHaveOneRecord) {
  Build(Shape().Talkers(2));
  ::testing::internal::CaptureStderr();
  auto ok = Gen("ok", {}, "alice");
  auto failed = Gen("failed", {}, "bob");
  auto aborted = Gen("aborted");
  scheduler_.AdvanceBy(absl::Milliseconds(20));
  Out(0, 0, "ok", {Text("Hello there")});  // talker: ok -> K0
  Out(0, 0, "failed", {Text("Nope")});     // talker: failed -> K1
  scheduler_.AdvanceBy(absl::Milliseconds(10));
  Done(0, 0, "ok", {Text(" world")});
  Out(1, 0, "ok", {Codes({1, 2, 3})}, true);           // vocoder: ok -> W0
  Done(2, 0, "ok", {Audio(std::string(4800, '\0'))});  // 0.1 s at 24 kHz.
  scheduler_.AdvanceBy(absl::Milliseconds(70));
  core().OnReplicaDown(1, 1, absl::UnavailableError("worker exited"));
  ASSERT_TRUE(AbortNow({"aborted"}).ok());
  const std::string logged = ::testing::internal::GetCapturedStderr();

  const std::vector<std::string> lines = AccessLines(logged);
  ASSERT_THAT(lines, SizeIs(3)) << logged;
  EXPECT_THAT(lines[0],
              HasSubstr(" info orchestrator request=ok access identity=alice finish=stop "
                        "stages=thinker:0@T0#1,talker:0@K0#1,vocoder:0@W0#1 output_tokens=3 "
                        "audio_seconds=0.100 first_output_ms=20.0 duration_ms=30.0"));
  EXPECT_THAT(lines[1],
              HasSubstr(" info orchestrator request=failed access identity=bob finish=error "
                        "stages=thinker:0@T0#1,talker:1@K1#1 output_tokens=1 audio_seconds=0.000 "
                        "first_output_ms=20.0 duration_ms=100.0 "
                        "error=\"UNAVAILABLE: stage 1 (talker) replica 1 died: worker exited\""));
  EXPECT_THAT(
      lines[2],
      HasSubstr(" info orchestrator request=aborted access identity=\"\" finish=abort "
                "stages=thinker:0@T0#1 output_tokens=0 audio_seconds=0.000 first_output_ms=none "
                "duration_ms=100.0"));

  const v1::PipelineStatus status = core().Status();
  ASSERT_THAT(status.recent(), SizeIs(3));  // Newest first.
  const v1::FinishedRequest& a = status.recent(0);
  const v1::FinishedRequest& f = status.recent(1);
  const v1::FinishedRequest& o = status.recent(2);
  EXPECT_EQ(o.request_id(), "ok");
  EXPECT_EQ(o.identity(), "alice");
  EXPECT_EQ(o.finish_reason(), v1::FINISH_REASON_STOP);
  EXPECT_THAT(Ran(o), ElementsAre("0:0@T0#1", "1:0@K0#1", "2:0@W0#1"));
  EXPECT_EQ(o.output_tokens(), 3);
  EXPECT_DOUBLE_EQ(o.audio_seconds(), 0.1);
  EXPECT_DOUBLE_EQ(o.first_output_seconds(), 0.02);
  EXPECT_DOUBLE_EQ(o.duration_seconds(), 0.03);
  EXPECT_EQ(o.finished_unix_ms(), absl::ToUnixMillis(scheduler_.Now() - absl::Milliseconds(70)));
  EXPECT_EQ(f.request_id(), "failed");
  EXPECT_EQ(f.finish_reason(), v1::FINISH_REASON_ERROR);
  EXPECT_THAT(Ran(f), ElementsAre("0:0@T0#1", "1:1@K1#1"));
  EXPECT_EQ(f.error(), "UNAVAILABLE: stage 1 (talker) replica 1 died: worker exited");
  EXPECT_EQ(a.request_id(), "aborted");
  EXPECT_EQ(a.finish_reason(), v1::FINISH_REASON_ABORT);
  EXPECT_THAT(Ran(a), ElementsAre("0:0@T0#1"));
  EXPECT_EQ(a.first_output_seconds(), -1);
}

// Audio a listener would have waited for, with the pipeline's jitter buffer:
// the record, the line and the metrics say how it was heard.
TEST_F(PipelineCoreAccessTest, AudioThatCameLateIsAStallOnTheRecordTheLineAndTheMetrics) {
  PipelineConfig config = OmniConfig(Shape());
  config.playback.jitter_buffer = absl::Milliseconds(50);
  Build(std::move(config));
  const std::string half_second(24000, '\0');  // 0.5 s at 24 kHz.
  ::testing::internal::CaptureStderr();
  auto heard = Gen("heard", {v1::MODALITY_AUDIO});
  Done(0, 0, "heard", {Text("Hello there")});
  Done(1, 0, "heard", {Codes({1, 2, 3})});
  scheduler_.AdvanceBy(absl::Milliseconds(200));
  Out(2, 0, "heard", {Audio(half_second)});  // Plays from 250 to 750 ms.
  scheduler_.AdvanceBy(absl::Milliseconds(400));
  Out(2, 0, "heard", {Audio(half_second)});  // 600: in time; plays to 1250.
  scheduler_.AdvanceBy(absl::Milliseconds(900));
  Done(2, 0, "heard", {Audio(half_second)});  // 1500: 250 ms of silence before it.
  const std::string logged = ::testing::internal::GetCapturedStderr();

  ASSERT_THAT(core().Status().recent(), SizeIs(1));
  const v1::FinishedRequest& record = core().Status().recent(0);
  EXPECT_DOUBLE_EQ(record.audio_seconds(), 1.5);
  EXPECT_DOUBLE_EQ(record.first_audio_seconds(), 0.2);
  EXPECT_DOUBLE_EQ(record.real_time_factor(), 1.0);
  EXPECT_EQ(record.playback_stalls(), 1);
  EXPECT_DOUBLE_EQ(record.stalled_seconds(), 0.25);
  const std::vector<std::string> lines = AccessLines(logged);
  ASSERT_THAT(lines, SizeIs(1)) << logged;
  EXPECT_THAT(lines[0], HasSubstr(" audio_seconds=1.500 first_output_ms=200.0 duration_ms=1500.0 "
                                  "first_audio_ms=200.0 rtf=1.000 stalls=1 stalled_ms=250.0"));

  const std::string text = core().metrics_registry().Render();
  EXPECT_THAT(text, HasSubstr("omnistage_time_to_first_audio_seconds_bucket{le=\"0.25\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("omnistage_audio_responses_total{stalled=\"true\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("omnistage_playback_stalls_total 1\n"));
  EXPECT_THAT(text, HasSubstr("omnistage_playback_stalled_seconds_total 0.25\n"));
  EXPECT_THAT(text, HasSubstr("omnistage_audio_seconds_total 1.5\n"));
}

TEST_F(PipelineCoreAccessTest, ARefusedCallHasNoRecord) {
  Build();
  ::testing::internal::CaptureStderr();
  auto first = Gen("same", {v1::MODALITY_TEXT});
  auto duplicate = Gen("same", {v1::MODALITY_TEXT});  // ALREADY_EXISTS: never admitted.
  Done(0, 0, "same");
  const std::string logged = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(duplicate->fail_count(), 1);
  EXPECT_THAT(AccessLines(logged), SizeIs(1)) << logged;
  ASSERT_THAT(core().Status().recent(), SizeIs(1));
  EXPECT_EQ(core().Status().recent(0).request_id(), "same");
}

TEST_F(PipelineCoreAccessTest, SwitchedOffItWritesNoLineButKeepsTheRecords) {
  Build();
  core().set_access_log(false);
  ::testing::internal::CaptureStderr();
  auto sink = Gen("quiet", {v1::MODALITY_TEXT});
  Done(0, 0, "quiet", {Text("hi")});
  const std::string logged = ::testing::internal::GetCapturedStderr();
  ASSERT_EQ(sink->terminal_count(), 1);
  EXPECT_THAT(AccessLines(logged), IsEmpty()) << logged;
  ASSERT_THAT(core().Status().recent(), SizeIs(1));
  EXPECT_EQ(core().Status().recent(0).output_tokens(), 1);
}

TEST_F(PipelineCoreAccessTest, StatusKeepsTheFiftyNewest) {
  Build(Shape());
  core().set_access_log(false);
  for (int i = 0; i < 60; ++i) {
    const std::string id = absl::StrCat("r", i);
    Gen(id, {v1::MODALITY_TEXT});
    Done(0, 0, id);
  }
  const v1::PipelineStatus status = core().Status();
  ASSERT_THAT(status.recent(), SizeIs(50));
  EXPECT_EQ(status.recent(0).request_id(), "r59");
  EXPECT_EQ(status.recent(49).request_id(), "r10");
}

}  // namespace
}  // namespace pipeline_core_test
}  // namespace omnistage
