// A request's record as RequestAccount counts it on a hand-moved clock, the
// ring of recent records (newest first, bounded), and the access line: its
// exact text, its quoting, and the switch that turns it off.
#include "orchestrator/core/finished_requests.h"

#include <algorithm>
#include <string>
#include <tuple>
#include <vector>

#include "absl/time/time.h"
#include "common/log.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "orchestrator/core/testing/silent_audio.h"

namespace omnistage {
namespace {

using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

const absl::Time kAdmitted = absl::FromUnixSeconds(1800000000);

v1::Payload Text(const std::string& text) {
  v1::Payload p;
  p.mutable_text()->set_text(text);
  return p;
}
v1::Payload Tokens(int n) {
  v1::Payload p;
  for (int i = 0; i < n; ++i) p.mutable_tokens()->add_ids(i);
  return p;
}
v1::Terminal Ended(v1::FinishReason reason) {
  v1::Terminal terminal;
  terminal.set_finish_reason(reason);
  return terminal;
}
v1::FinishedRequest Named(const std::string& id) {
  v1::FinishedRequest record;
  record.set_request_id(id);
  return record;
}

TEST(RequestAccountTest, CountsWhatTheClientGotAndWhen) {
  RequestAccount account(kAdmitted);
  EXPECT_EQ(account.Delivered(Text("  Hello there, world "), kAdmitted + absl::Milliseconds(20)),
            3);
  EXPECT_EQ(account.Delivered(Tokens(4), kAdmitted + absl::Milliseconds(30)), 4);
  EXPECT_EQ(account.Delivered(SilentAudio(0.5), kAdmitted + absl::Milliseconds(40)), 0);
  EXPECT_EQ(account.Delivered(SilentAudio(0.25), kAdmitted + absl::Milliseconds(50)), 0);

  const absl::Time end = kAdmitted + absl::Milliseconds(130);
  const v1::FinishedRequest record = account.Close(Ended(v1::FINISH_REASON_STOP), end);
  EXPECT_EQ(record.finish_reason(), v1::FINISH_REASON_STOP);
  EXPECT_EQ(record.output_tokens(), 7);
  EXPECT_DOUBLE_EQ(record.audio_seconds(), 0.75);
  EXPECT_DOUBLE_EQ(record.first_output_seconds(), 0.020);
  EXPECT_DOUBLE_EQ(record.duration_seconds(), 0.130);
  EXPECT_DOUBLE_EQ(record.first_audio_seconds(), 0.040);
  EXPECT_DOUBLE_EQ(record.real_time_factor(), 0.050 / 0.75);
  EXPECT_EQ(record.playback_stalls(), 0);
  EXPECT_EQ(record.finished_unix_ms(), absl::ToUnixMillis(end));
  EXPECT_THAT(record.error(), IsEmpty());
  // 7 tokens from 20 ms to 50 ms: 5 ms between them.
  EXPECT_DOUBLE_EQ(record.between_outputs_seconds(), 0.005);
}

TEST(RequestAccountTest, AudioAloneCountsTheTimeBetweenChunks) {
  RequestAccount account(kAdmitted);
  account.Delivered(SilentAudio(0.5), kAdmitted + absl::Milliseconds(100));
  EXPECT_EQ(account.Close(Ended(v1::FINISH_REASON_STOP), kAdmitted + absl::Seconds(1))
                .between_outputs_seconds(),
            0);
  account.Delivered(SilentAudio(0.5), kAdmitted + absl::Milliseconds(300));
  account.Delivered(SilentAudio(0.5), kAdmitted + absl::Milliseconds(400));
  EXPECT_DOUBLE_EQ(account.Close(Ended(v1::FINISH_REASON_STOP), kAdmitted + absl::Seconds(1))
                       .between_outputs_seconds(),
                   0.15);
}

TEST(RequestAccountTest, ARequestWithNoOutputHasNoFirstOutputAndAnErrorNamesItsCode) {
  RequestAccount account(kAdmitted);
  v1::Terminal failed = Ended(v1::FINISH_REASON_ERROR);
  failed.mutable_error()->set_code(static_cast<int>(absl::StatusCode::kUnavailable));
  failed.mutable_error()->set_message("stage 1 (talker) replica 0 died: Socket closed");
  const v1::FinishedRequest record = account.Close(failed, kAdmitted + absl::Seconds(2));
  EXPECT_EQ(record.first_output_seconds(), -1);
  EXPECT_EQ(record.first_audio_seconds(), -1);
  EXPECT_EQ(record.real_time_factor(), 0);
  EXPECT_DOUBLE_EQ(record.duration_seconds(), 2);
  EXPECT_EQ(record.error(), "UNAVAILABLE: stage 1 (talker) replica 0 died: Socket closed");
}

TEST(RequestAccountTest, AudioLaterThanTheListenerPlaysIsAStall) {
  // 300 ms of jitter buffer: playing starts at 0.4 s.
  RequestAccount account(kAdmitted, absl::Milliseconds(300));
  account.Delivered(SilentAudio(0.5), kAdmitted + absl::Milliseconds(100));   // plays 0.4 .. 0.9
  account.Delivered(SilentAudio(0.5), kAdmitted + absl::Milliseconds(800));   // in time: .. 1.4
  account.Delivered(SilentAudio(1.0), kAdmitted + absl::Milliseconds(1600));  // 200 ms late
  EXPECT_EQ(account.playback().runs_out(), kAdmitted + absl::Milliseconds(2600));
  const v1::FinishedRequest record =
      account.Close(Ended(v1::FINISH_REASON_STOP), kAdmitted + absl::Seconds(2));
  EXPECT_DOUBLE_EQ(record.first_audio_seconds(), 0.1);
  EXPECT_DOUBLE_EQ(record.real_time_factor(), 1.6 / 2.0);
  EXPECT_EQ(record.playback_stalls(), 1);
  EXPECT_DOUBLE_EQ(record.stalled_seconds(), 0.2);
}

TEST(FinishedRequestsTest, KeepsTheNewestFirstUpToItsCapacity) {
  FinishedRequests finished({"llm"}, /*capacity=*/3);
  finished.set_access_log(false);
  google::protobuf::RepeatedPtrField<v1::FinishedRequest> recent;
  finished.AppendTo(&recent);
  EXPECT_THAT(recent, IsEmpty());

  for (const char* id : {"a", "b"}) finished.Add(Named(id), "");
  finished.AppendTo(&recent);
  ASSERT_EQ(recent.size(), 2);
  EXPECT_EQ(recent[0].request_id(), "b");
  EXPECT_EQ(recent[1].request_id(), "a");

  for (const char* id : {"c", "d", "e"}) finished.Add(Named(id), "");
  recent.Clear();
  finished.AppendTo(&recent);
  std::vector<std::string> ids;
  for (const v1::FinishedRequest& r : recent) ids.push_back(r.request_id());
  EXPECT_EQ(ids, (std::vector<std::string>{"e", "d", "c"}));
  EXPECT_EQ(finished.size(), 3u);
}

TEST(FinishedRequestsTest, TheLineNamesStagesReplicasAndInstances) {
  FinishedRequests finished({"thinker", "talker", "vocoder"});
  v1::FinishedRequest record = Named("req-41");
  record.set_identity("alice");
  record.set_finish_reason(v1::FINISH_REASON_STOP);
  for (auto [stage, replica, instance] :
       {std::tuple<int, int, const char*>{0, 0, "thinker-0-4711-1"},
        {1, 1, "talker-1-4711-1"},
        {2, 0, ""}}) {
    v1::StageReplica* ran = record.add_stages();
    ran->set_stage_id(stage);
    ran->set_replica(replica);
    ran->set_instance_id(instance);
  }
  record.set_output_tokens(12);
  record.set_audio_seconds(1.25);
  record.set_first_output_seconds(0.02);
  record.set_duration_seconds(0.1305);
  record.set_first_audio_seconds(0.0952);
  record.set_real_time_factor(0.0811);
  record.set_playback_stalls(2);
  record.set_stalled_seconds(0.0404);
  EXPECT_EQ(finished.AccessLine(record),
            "access identity=alice finish=stop "
            "stages=thinker:0@thinker-0-4711-1,talker:1@talker-1-4711-1,vocoder:0 "
            "output_tokens=12 audio_seconds=1.250 first_output_ms=20.0 duration_ms=130.5 "
            "first_audio_ms=95.2 rtf=0.081 stalls=2 stalled_ms=40.4");
}

// Each judged objective, after the audio figures; none without one.
TEST(FinishedRequestsTest, TheLineSaysHowEachObjectiveWent) {
  FinishedRequests finished({"llm"});
  v1::FinishedRequest record = Named("r1");
  record.set_finish_reason(v1::FINISH_REASON_STOP);
  record.set_first_output_seconds(0.02);
  EXPECT_THAT(finished.AccessLine(record), Not(HasSubstr("objective")));
  record.set_first_output_objective(v1::OBJECTIVE_OUTCOME_MET);
  record.set_first_audio_objective(v1::OBJECTIVE_OUTCOME_MISSED);
  record.set_criticality(v1::CRITICALITY_STANDARD);
  EXPECT_THAT(finished.AccessLine(record),
              EndsWith(" first_output_objective=met first_audio_objective=missed "
                       "criticality=standard"));
  // With the predictor's figure and why it missed.
  record.set_between_outputs_objective(v1::OBJECTIVE_OUTCOME_MET);
  record.set_predicted_first_output_seconds(0.0184);
  record.set_objective_miss("queued");
  EXPECT_THAT(finished.AccessLine(record),
              EndsWith(" first_audio_objective=missed between_outputs_objective=met "
                       "criticality=standard predicted_first_output_ms=18.4 "
                       "objective_miss=queued"));
}

TEST(FinishedRequestsTest, ValuesWithSpacesOrQuotesAreQuotedAndNothingIsLeftOut) {
  FinishedRequests finished({"llm"});
  v1::FinishedRequest record = Named("r1");
  record.set_finish_reason(v1::FINISH_REASON_ERROR);
  record.set_first_output_seconds(-1);
  record.set_error("UNAVAILABLE: stage 0 (llm) said \"no\"");
  EXPECT_EQ(finished.AccessLine(record),
            "access identity=\"\" finish=error stages=none output_tokens=0 audio_seconds=0.000 "
            "first_output_ms=none duration_ms=0.0 "
            "error=\"UNAVAILABLE: stage 0 (llm) said \\\"no\\\"\"");
  record.set_identity("ops team");
  EXPECT_THAT(finished.AccessLine(record), HasSubstr("access identity=\"ops team\" "));
}

TEST(FinishedRequestsTest, WritesOneInfoLinePerRecordUnlessSwitchedOff) {
  InitLogging({"orchestrator", LogFormat::kText, LogLevel::kInfo});
  FinishedRequests finished({"llm"});
  ::testing::internal::CaptureStderr();
  finished.Add(Named("logged"), "4bf92f3577b34da6a3ce929d0e0e4736");
  std::string out = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(out, HasSubstr(" info orchestrator request=logged "
                             "trace=4bf92f3577b34da6a3ce929d0e0e4736 access identity="));
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;

  finished.set_access_log(false);
  ::testing::internal::CaptureStderr();
  finished.Add(Named("quiet"), "");
  out = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(out, IsEmpty());
  google::protobuf::RepeatedPtrField<v1::FinishedRequest> recent;
  finished.AppendTo(&recent);
  ASSERT_EQ(recent.size(), 2);  // Still kept for status.
  EXPECT_EQ(recent[0].request_id(), "quiet");
}

}  // namespace
}  // namespace omnistage
