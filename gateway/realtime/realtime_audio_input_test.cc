// The input audio buffer (realtime_audio_input.h) without a connection or an
// orchestrator: the turn's call is a control that reaches no call, so what
// is asserted is what the client is told and what the turn holds.
#include "gateway/realtime/realtime_audio_input.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/field_error.h"
#include "gateway/audio/testing/spoken_clip.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace omnistage {
namespace {

using nlohmann::json;
using Op = RealtimeAudioInput::Op;

class AudioInputTest : public ::testing::Test {
 protected:
  AudioInputTest()
      : input_(RealtimeAudioInput::Host{
            &ids_, &conversation_, [this](const std::string& e) { events_.push_back(json::parse(e)); },
            [this] { return conversation_.AudioTurnRequest(config_, model_); },
            [this](v1::GenerateRequest request, std::shared_ptr<AudioTurn> turn) {
              requests_.push_back(request);
              turns_.push_back(turn);
              return std::make_shared<RealtimeDuplexControl>();
            }}) {
    model_.id = "omni-demo";
  }

  // The types of the events sent since the last call.
  std::vector<std::string> Sent() {
    std::vector<std::string> types;
    for (const json& e : events_) types.push_back(e["type"]);
    last_ = events_;
    events_.clear();
    return types;
  }
  static v1::GenerateResponse Stage0Text(const std::string& text) {
    v1::GenerateResponse response;
    v1::OutputChunk* chunk = response.add_outputs();
    chunk->set_stage_id(0);
    chunk->mutable_payload()->mutable_text()->set_text(text);
    return response;
  }

  EventIds ids_;
  RealtimeConversation conversation_;
  RealtimeConfig config_;
  ServedModel model_;
  std::vector<json> events_, last_;
  std::vector<v1::GenerateRequest> requests_;
  std::vector<std::shared_ptr<AudioTurn>> turns_;
  RealtimeAudioInput input_;
};

TEST_F(AudioInputTest, ATurnFromFirstAppendToCommit) {
  input_.Handle(Op::kAppend, std::string(480, '\0'), "evt_1");
  input_.Handle(Op::kAppend, std::string(480, '\0'), "evt_2");
  EXPECT_TRUE(Sent().empty());  // Appends are answered by nothing.
  ASSERT_EQ(requests_.size(), 1u);  // One call for the turn.
  EXPECT_EQ(requests_[0].prompt(), "");  // Nothing before it.
  EXPECT_EQ(turns_[0]->audio_bytes, 960);

  // Heard before the commit: kept until the item exists.
  v1::GenerateResponse heard = Stage0Text("hello");
  EXPECT_FALSE(input_.Heard(*turns_[0], &heard, false));
  EXPECT_EQ(heard.outputs_size(), 0);
  EXPECT_TRUE(Sent().empty());

  input_.Handle(Op::kCommit, "", "evt_3");
  EXPECT_EQ(Sent(), (std::vector<std::string>{
                        "input_audio_buffer.committed", "conversation.item.added",
                        "conversation.item.done",
                        "conversation.item.input_audio_transcription.delta"}));
  const std::string item_id = last_[0]["item_id"];
  EXPECT_EQ(last_[1]["item"]["id"], item_id);
  EXPECT_EQ(last_[1]["item"]["role"], "user");
  EXPECT_EQ(last_[1]["item"]["content"][0]["type"], "input_audio");
  EXPECT_EQ(last_[3]["delta"], "hello");

  // The answer waits for response.create; more of the transcript goes out.
  v1::GenerateResponse answer = Stage0Text(" world");
  v1::OutputChunk* reply = answer.add_outputs();
  reply->set_stage_id(1);
  reply->mutable_payload()->mutable_text()->set_text("Hi.");
  EXPECT_TRUE(input_.Heard(*turns_[0], &answer, false));
  EXPECT_EQ(Sent(), std::vector<std::string>{"conversation.item.input_audio_transcription.delta"});
  ASSERT_TRUE(turns_[0]->held.has_value());
  EXPECT_EQ(turns_[0]->held->outputs_size(), 1);
  EXPECT_EQ(conversation_.Find(item_id)->text, "hello world");

  // The next turn's audio waits for this one's response.
  input_.Handle(Op::kAppend, "\x01\x02", "evt_4");
  EXPECT_EQ(Sent(), std::vector<std::string>{"error"});
  EXPECT_EQ(last_[0]["error"]["code"], "input_audio_turn_pending");
  input_.Handle(Op::kCommit, "", "evt_5");
  Sent();
  EXPECT_EQ(last_[0]["error"]["code"], "input_audio_buffer_commit_empty");

  std::shared_ptr<AudioTurn> taken = input_.TakeCommitted();
  ASSERT_EQ(taken, turns_[0]);
  EXPECT_EQ(input_.TakeCommitted(), nullptr);
  input_.Ended(*taken, grpc::Status::OK, /*responding=*/true);
  EXPECT_EQ(Sent(),
            std::vector<std::string>{"conversation.item.input_audio_transcription.completed"});
  EXPECT_EQ(last_[0]["transcript"], "hello world");
  EXPECT_DOUBLE_EQ(last_[0]["usage"]["seconds"].get<double>(), 960.0 / 48000);

  // Free for the next turn, whose prompt is the conversation so far: stage 0
  // passes it through first, and that echo is no part of what was heard.
  input_.Handle(Op::kAppend, "\x01\x02", "evt_6");
  ASSERT_EQ(requests_.size(), 2u);
  EXPECT_EQ(requests_[1].prompt(), "hello world\n");
  v1::GenerateResponse echoed = Stage0Text("hello world\nagain");
  input_.Heard(*turns_[1], &echoed, false);
  EXPECT_EQ(turns_[1]->transcript, "again");
}

TEST_F(AudioInputTest, MalformedAudioAndClear) {
  input_.Handle(Op::kAppend, "\x01\x02\x03", "evt_odd");
  EXPECT_EQ(Sent(), std::vector<std::string>{"error"});
  EXPECT_EQ(last_[0]["error"]["code"], "invalid_value");
  EXPECT_EQ(last_[0]["error"]["param"], "audio");
  EXPECT_EQ(last_[0]["error"]["event_id"], "evt_odd");
  input_.Handle(Op::kAppend, "", "evt_empty");
  Sent();
  EXPECT_EQ(last_[0]["error"]["code"], "invalid_value");
  EXPECT_TRUE(requests_.empty());  // No call for either.

  input_.Handle(Op::kAppend, "\x01\x02", "");
  input_.Handle(Op::kClear, "", "");
  EXPECT_EQ(Sent(), std::vector<std::string>{"input_audio_buffer.cleared"});
  EXPECT_TRUE(turns_[0]->failed);  // Cancelled: its end says nothing.
  input_.Ended(*turns_[0], grpc::Status(grpc::StatusCode::CANCELLED, "x"), false);
  EXPECT_TRUE(Sent().empty());
  input_.Handle(Op::kCommit, "", "");
  Sent();
  EXPECT_EQ(last_[0]["error"]["code"], "input_audio_buffer_commit_empty");
}

TEST_F(AudioInputTest, APipelineThatTakesNoAudioIsLearnedFromTheCall) {
  input_.Handle(Op::kAppend, "\x01\x02", "");
  v1::GenerateResponse failed;
  v1::Error* error = failed.mutable_terminal()->mutable_error();
  failed.mutable_terminal()->set_finish_reason(v1::FINISH_REASON_ERROR);
  error->set_code(static_cast<int>(grpc::StatusCode::INVALID_ARGUMENT));
  error->set_message("engine thinker: input.payloads[0] is audio, but this engine accepts text");
  error->set_stage_id(0);
  EXPECT_TRUE(input_.Heard(*turns_[0], &failed, false));
  EXPECT_EQ(Sent(), std::vector<std::string>{"error"});
  EXPECT_EQ(last_[0]["error"]["code"], "input_audio_not_supported");
  // Every later audio event is answered at once, with no call.
  input_.Handle(Op::kAppend, "\x01\x02", "evt_again");
  Sent();
  EXPECT_EQ(last_[0]["error"]["code"], "input_audio_not_supported");
  EXPECT_EQ(last_[0]["error"]["event_id"], "evt_again");
  EXPECT_EQ(requests_.size(), 1u);
}

// Turn detection on: `clip` appended in 100 ms pieces.
class DetectedTurnTest : public AudioInputTest {
 protected:
  void Detect(TurnDetection turns = {}) { ASSERT_FALSE(input_.Configure(turns)); }
  void Append(const SpokenClip& clip) {
    const std::string bytes = clip.Bytes();
    for (size_t at = 0; at < bytes.size(); at += 4800) {
      input_.Handle(Op::kAppend, bytes.substr(at, 4800), "evt_append");
    }
  }
};

constexpr char kFox[] = "The quick brown fox jumps over the lazy dog.";
constexpr char kTable[] = "Please book a table for two at seven tonight.";

TEST_F(DetectedTurnTest, SpeechIsATurnCommittedAtItsStopAndAnswered) {
  Detect();
  SpokenClip silence;
  silence.Silence(2000);
  Append(silence);
  EXPECT_TRUE(Sent().empty());
  EXPECT_TRUE(requests_.empty());  // Silence opens no call.
  EXPECT_FALSE(input_.TakeSpeechStarted());

  SpokenClip clip;
  clip.Silence(600).Say(kFox).Silence(900);
  Append(clip);
  EXPECT_TRUE(input_.TakeSpeechStarted());
  EXPECT_FALSE(input_.TakeSpeechStarted());
  EXPECT_EQ(Sent(), (std::vector<std::string>{
                        "input_audio_buffer.speech_started", "input_audio_buffer.speech_stopped",
                        "input_audio_buffer.committed", "conversation.item.added",
                        "conversation.item.done"}));
  const std::string item_id = last_[0]["item_id"];
  EXPECT_EQ(last_[1]["item_id"], item_id);
  EXPECT_EQ(last_[2]["item_id"], item_id);
  EXPECT_EQ(last_[3]["item"]["id"], item_id);
  // In the session's clock (the 2 s of silence first).
  const int64_t start = last_[0]["audio_start_ms"], end = last_[1]["audio_end_ms"];
  EXPECT_NEAR(start, 2000 + clip.onsets_ms[0] - 300, 120);
  EXPECT_NEAR(end, 2000 + clip.ends_ms[0], 150);
  ASSERT_EQ(requests_.size(), 1u);
  // The turn's audio: from its padded start to where 500 ms of silence passed.
  EXPECT_NEAR(turns_[0]->audio_bytes, (end + 500 - start) * 48, 110 * 48);
  EXPECT_TRUE(turns_[0]->committed);
  EXPECT_TRUE(turns_[0]->detected);
  // create_response: the session answers it.
  EXPECT_EQ(input_.TakeAutoResponse(), turns_[0]);
  EXPECT_EQ(input_.TakeCommitted(), nullptr);
}

TEST_F(DetectedTurnTest, SpeechWhileATurnWaitsIsRefusedOnceAndNotHeard) {
  TurnDetection turns;
  turns.create_response = false;
  Detect(turns);
  SpokenClip clip;
  clip.Silence(600).Say(kFox).Silence(900);
  Append(clip);
  Sent();
  ASSERT_EQ(requests_.size(), 1u);
  EXPECT_EQ(input_.TakeAutoResponse(), nullptr);  // The client asks for it.

  SpokenClip again;
  again.Say(kTable).Silence(900);
  Append(again);
  EXPECT_EQ(Sent(), std::vector<std::string>{"error"});
  EXPECT_EQ(last_[0]["error"]["code"], "input_audio_turn_pending");
  EXPECT_EQ(requests_.size(), 1u);

  // Once it is taken, the next speech is a turn of its own.
  EXPECT_EQ(input_.TakeCommitted(), turns_[0]);
  Append(again);
  EXPECT_EQ(requests_.size(), 2u);
  EXPECT_EQ(Sent().front(), "input_audio_buffer.speech_started");
}

TEST_F(DetectedTurnTest, ACommitTakesTheBufferWhenNoSpeechWasHeard) {
  Detect();
  SpokenClip quiet;
  quiet.Silence(500);
  Append(quiet);
  input_.Handle(Op::kCommit, "", "evt_commit");
  EXPECT_EQ(Sent(), (std::vector<std::string>{"input_audio_buffer.committed",
                                              "conversation.item.added", "conversation.item.done"}));
  ASSERT_EQ(requests_.size(), 1u);
  EXPECT_EQ(turns_[0]->audio_bytes, 500 * 48);
  EXPECT_EQ(input_.TakeAutoResponse(), nullptr);  // Committed by hand: response.create.
  EXPECT_EQ(input_.TakeCommitted(), turns_[0]);
  // Nothing held now.
  input_.Handle(Op::kCommit, "", "evt_again");
  Sent();
  EXPECT_EQ(last_[0]["error"]["code"], "input_audio_buffer_commit_empty");
}

TEST_F(DetectedTurnTest, ClearEndsTheTurnGoingOn) {
  Detect();
  SpokenClip clip;
  clip.Silence(600).Say(kFox);
  Append(clip);
  EXPECT_EQ(Sent(), std::vector<std::string>{"input_audio_buffer.speech_started"});
  input_.Handle(Op::kClear, "", "evt_clear");
  EXPECT_EQ(Sent(), std::vector<std::string>{"input_audio_buffer.cleared"});
  EXPECT_TRUE(turns_[0]->failed);
  // The rest of the sentence starts another turn; it is committed at its stop.
  SpokenClip rest;
  rest.Say(kTable).Silence(900);
  Append(rest);
  EXPECT_EQ(Sent().back(), "conversation.item.done");
  EXPECT_EQ(requests_.size(), 2u);
}

TEST_F(DetectedTurnTest, OnAPipelineThatTakesNoAudioEachSpeechIsRefusedNotEachAppend) {
  Detect();
  SpokenClip clip;
  clip.Silence(600).Say(kFox);
  Append(clip);
  Sent();
  v1::GenerateResponse failed;
  failed.mutable_terminal()->set_finish_reason(v1::FINISH_REASON_ERROR);
  failed.mutable_terminal()->mutable_error()->set_code(
      static_cast<int>(grpc::StatusCode::FAILED_PRECONDITION));
  failed.mutable_terminal()->mutable_error()->set_message("stage 0 takes no streamed input");
  EXPECT_TRUE(input_.Heard(*turns_[0], &failed, false));
  EXPECT_EQ(Sent(), std::vector<std::string>{"error"});
  SpokenClip more;
  more.Silence(1500).Say(kTable).Silence(900);
  Append(more);
  EXPECT_EQ(Sent(), std::vector<std::string>{"error"});  // One, at the speech.
  EXPECT_EQ(last_[0]["error"]["code"], "input_audio_not_supported");
  EXPECT_EQ(requests_.size(), 1u);
}

TEST_F(DetectedTurnTest, TurnDetectionOffIsManualAgain) {
  Detect();
  ASSERT_FALSE(input_.Configure(std::nullopt));
  input_.Handle(Op::kAppend, std::string(480, '\0'), "evt_1");
  EXPECT_EQ(requests_.size(), 1u);  // The first append opens the turn.
  EXPECT_TRUE(Sent().empty());
}

TEST(AudioTurnErrorTest, EachFailureItsCode) {
  const std::vector<std::pair<absl::Status, std::string>> cases = {
      {absl::FailedPreconditionError("stage 0 (thinker, engine thinker) takes no streamed input"),
       "input_audio_not_supported"},
      // The orchestrator's limits, told apart by the field their error names
      // (the message is for people).
      {AtField(absl::InvalidArgumentError("streamed input: too much"), "limits.max_input_bytes"),
       "input_audio_buffer_too_large"},
      {AtField(absl::InvalidArgumentError("streamed input: too large"),
               "limits.max_input_chunk_bytes"),
       "input_audio_chunk_too_large"},
      {AtField(absl::DeadlineExceededError("streamed input: nothing for 1s"),
               "limits.input_idle_ms"),
       "input_audio_idle_timeout"},
  };
  for (const auto& [status, code] : cases) {
    const RealtimeError error = RealtimeAudioInput::TurnError(status);
    EXPECT_EQ(error.code, code) << status;
    EXPECT_EQ(error.type, "invalid_request_error") << status;
  }
  const RealtimeError died = RealtimeAudioInput::TurnError(absl::UnavailableError("replica died"));
  EXPECT_EQ(died.type, "server_error");
  EXPECT_NE(died.code, "input_audio_not_supported");
}

TEST(AudioTurnTest, Stage0TextIsTakenOutInOrder) {
  v1::GenerateResponse response;
  for (int stage : {0, 1, 0, 3}) {
    v1::OutputChunk* chunk = response.add_outputs();
    chunk->set_stage_id(stage);
    if (stage == 3) {
      chunk->mutable_payload()->mutable_audio()->set_pcm_s16le("ab");
    } else {
      chunk->mutable_payload()->mutable_text()->set_text(std::to_string(stage) + ";");
    }
  }
  EXPECT_EQ(RealtimeAudioInput::TakeStage0Text(&response), "0;0;");
  ASSERT_EQ(response.outputs_size(), 2);
  EXPECT_EQ(response.outputs(0).stage_id(), 1);
  EXPECT_EQ(response.outputs(1).stage_id(), 3);
}

}  // namespace
}  // namespace omnistage

// Its own main rather than gtest_main's: the turn detector links
// libwebrtc_audio_processing.so, which exports a main of its own (bazel/BUILD).
int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
