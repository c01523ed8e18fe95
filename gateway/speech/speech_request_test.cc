#include "gateway/speech/speech_request.h"

#include <string>
#include <variant>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace omnistage {
namespace {

using ::testing::HasSubstr;

const SpeechModels kModels{{"tts-1", "gpt-4o-mini-tts"}, /*voice_stage=*/1};

SpeechRequest Parsed(const std::string& body) {
  std::variant<SpeechRequest, ApiError> parsed = ParseSpeechRequest(body, kModels);
  EXPECT_TRUE(std::holds_alternative<SpeechRequest>(parsed)) << std::get<ApiError>(parsed).Json();
  return std::holds_alternative<SpeechRequest>(parsed) ? std::get<SpeechRequest>(parsed)
                                                       : SpeechRequest();
}

ApiError Refused(const std::string& body) {
  std::variant<SpeechRequest, ApiError> parsed = ParseSpeechRequest(body, kModels);
  EXPECT_TRUE(std::holds_alternative<ApiError>(parsed)) << body;
  return std::holds_alternative<ApiError>(parsed) ? std::get<ApiError>(parsed) : ApiError();
}

TEST(SpeechRequestTest, TheTextIsThePromptAndTheVoiceGoesToTheVoiceStage) {
  const SpeechRequest request =
      Parsed(R"({"model": "tts-1", "input": "Hello there.", "voice": "alloy"})");
  EXPECT_EQ(request.generate.prompt(), "Hello there.");
  EXPECT_EQ(request.format, "mp3");  // OpenAI's default.
  EXPECT_FALSE(request.sse);
  ASSERT_EQ(request.generate.stage_params_size(), 1);
  const v1::StageParameters& speaker = request.generate.stage_params(0);
  EXPECT_EQ(speaker.stage_id(), 1);
  EXPECT_EQ(speaker.extra().at("voice"), "f2");   // alloy's espeak-ng variant
  EXPECT_EQ(speaker.extra().count("speed"), 0u);  // 1 is the vocoder's own
  ASSERT_EQ(request.generate.output_modalities_size(), 1);
  EXPECT_EQ(request.generate.output_modalities(0), v1::MODALITY_AUDIO);
}

TEST(SpeechRequestTest, FormatSpeedAndStreamFormatAreRead) {
  const SpeechRequest request = Parsed(
      R"({"model": "gpt-4o-mini-tts", "input": "Hi", "voice": "croak",
          "response_format": "opus", "speed": 1.5, "stream_format": "sse",
          "instructions": "Speak slowly."})");
  EXPECT_EQ(request.format, "opus");
  EXPECT_TRUE(request.sse);
  EXPECT_EQ(request.speed, 1.5);
  const v1::StageParameters& speaker = request.generate.stage_params(0);
  EXPECT_EQ(speaker.extra().at("voice"), "croak");  // Not one of OpenAI's: as it is.
  EXPECT_EQ(speaker.extra().at("speed"), "1.5");
}

TEST(SpeechRequestTest, EachBadFieldIsRefusedByName) {
  struct Case {
    std::string body;
    std::string param;
    std::string says;
  };
  const std::string long_input(kMaxSpeechInputChars + 1, 'a');
  for (const Case& c : std::vector<Case>{
           {R"({"model": "tts-1", "voice": "alloy"})", "input",
            "Missing required parameter: 'input'"},
           {R"({"model": "tts-1", "input": "", "voice": "alloy"})", "input", "empty string"},
           {R"({"model": "tts-1", "input": 7, "voice": "alloy"})", "input", "expected a string"},
           {R"({"model": "tts-1", "input": ")" + long_input + R"(", "voice": "alloy"})", "input",
            "maximum length 4096, but got a string with length 4097"},
           {R"({"model": "tts-1", "input": "x"})", "voice", "Missing required parameter: 'voice'"},
           {R"({"model": "tts-1", "input": "x", "voice": {"id": "v"}})", "voice",
            "expected a string"},
           {R"({"model": "tts-1", "input": "x", "voice": "alloy", "response_format": "aac"})",
            "response_format", "'mp3', 'opus', 'flac', 'wav', 'pcm' (no AAC encoder"},
           {R"({"model": "tts-1", "input": "x", "voice": "alloy", "response_format": "ogg"})",
            "response_format", "Invalid value: 'ogg'"},
           {R"({"model": "tts-1", "input": "x", "voice": "alloy", "speed": 5})", "speed",
            "expected a value in [0.25, 4], but got 5"},
           {R"({"model": "tts-1", "input": "x", "voice": "alloy", "speed": "fast"})", "speed",
            "expected a number"},
           {R"({"model": "tts-1", "input": "x", "voice": "alloy", "stream_format": "raw"})",
            "stream_format", "'audio' and 'sse'"},
           {R"({"input": "x", "voice": "alloy"})", "model", "Missing required parameter"},
       }) {
    const ApiError error = Refused(c.body);
    EXPECT_EQ(error.http_status, 400) << c.body;
    EXPECT_EQ(error.param, c.param) << c.body;
    EXPECT_THAT(error.message, HasSubstr(c.says)) << c.body;
  }
}

TEST(SpeechRequestTest, LengthIsCountedInCharactersNotBytes) {
  std::string input;
  for (size_t i = 0; i < kMaxSpeechInputChars; ++i) input += "\xc3\xa9";  // é
  Parsed(R"({"model": "tts-1", "voice": "alloy", "input": ")" + input + R"("})");
}

TEST(SpeechRequestTest, AnotherModelIsNotFound) {
  const ApiError error = Refused(R"({"model": "gpt-4o", "input": "x", "voice": "alloy"})");
  EXPECT_EQ(error.http_status, 404);
  EXPECT_EQ(error.code, "model_not_found");
  EXPECT_THAT(error.message, HasSubstr("speech models are: tts-1, gpt-4o-mini-tts"));
}

TEST(SpeechRequestTest, ABodyThatIsNoJsonObjectIsRefused) {
  EXPECT_EQ(Refused("not json").http_status, 400);
  EXPECT_EQ(Refused("[1, 2]").http_status, 400);
  // Text that is not UTF-8: the field is named.
  const ApiError error = Refused("{\"model\": \"tts-1\", \"voice\": \"alloy\", \"input\": \"\xff\"}");
  EXPECT_EQ(error.http_status, 400);
  EXPECT_EQ(error.param, "input");
  EXPECT_THAT(error.message, HasSubstr("not valid UTF-8"));
}

}  // namespace
}  // namespace omnistage
