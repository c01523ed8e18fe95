// ParseTranscriptionRequest reads OpenAI's upload form, and refuses what it
// cannot serve with a 400, 404 or 413 naming the field.
#include "gateway/transcription/transcription_request.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace omnistage {
namespace {

constexpr char kType[] = "multipart/form-data; boundary=XyZ";
const std::vector<std::string> kModels = {"whisper-1", "gpt-4o-transcribe"};

// A form of (name, value) fields; "file" is sent as a file part.
std::string Form(const std::vector<std::pair<std::string, std::string>>& fields) {
  std::string body;
  for (const auto& [name, value] : fields) {
    absl::StrAppend(&body, "--XyZ\r\nContent-Disposition: form-data; name=\"", name, "\"",
                    name == "file" ? "; filename=\"hello.wav\"\r\nContent-Type: audio/wav" : "",
                    "\r\n\r\n", value, "\r\n");
  }
  return absl::StrCat(body, "--XyZ--\r\n");
}

ApiError Refusal(const std::vector<std::pair<std::string, std::string>>& fields) {
  auto parsed = ParseTranscriptionRequest(kType, Form(fields), kModels);
  EXPECT_TRUE(std::holds_alternative<ApiError>(parsed));
  return std::holds_alternative<ApiError>(parsed) ? std::get<ApiError>(parsed) : ApiError{};
}

TEST(TranscriptionRequestTest, ReadsTheForm) {
  auto parsed = ParseTranscriptionRequest(
      kType,
      Form({{"model", "whisper-1"},
            {"file", std::string("RIFF\0\1\2", 7)},
            {"response_format", "verbose_json"},
            {"timestamp_granularities[]", "segment"},
            {"timestamp_granularities[]", "word"},
            {"language", "en"},
            {"temperature", "0.2"},
            {"prompt", "ignored"}}),
      kModels);
  ASSERT_TRUE(std::holds_alternative<TranscriptionRequest>(parsed))
      << std::get<ApiError>(parsed).message;
  const TranscriptionRequest& r = std::get<TranscriptionRequest>(parsed);
  EXPECT_EQ(r.model, "whisper-1");
  EXPECT_EQ(r.file, std::string("RIFF\0\1\2", 7));
  EXPECT_EQ(r.filename, "hello.wav");
  EXPECT_EQ(r.format, "verbose_json");
  EXPECT_TRUE(r.words);
  EXPECT_FALSE(r.stream);
}

TEST(TranscriptionRequestTest, Defaults) {
  auto parsed = ParseTranscriptionRequest(
      kType, Form({{"file", "x"}, {"model", "gpt-4o-transcribe"}, {"stream", "true"}}), kModels);
  ASSERT_TRUE(std::holds_alternative<TranscriptionRequest>(parsed));
  const TranscriptionRequest& r = std::get<TranscriptionRequest>(parsed);
  EXPECT_EQ(r.format, "json");
  EXPECT_TRUE(r.stream);
  EXPECT_FALSE(r.words);
}

TEST(TranscriptionRequestTest, RefusesWhatItCannotServe) {
  EXPECT_EQ(Refusal({{"file", "x"}}).param, "model");
  EXPECT_EQ(Refusal({{"model", "whisper-1"}}).param, "file");
  const ApiError unknown = Refusal({{"file", "x"}, {"model", "tts-1"}});
  EXPECT_EQ(unknown.http_status, 404);
  EXPECT_EQ(unknown.code, "model_not_found");
  EXPECT_NE(unknown.message.find("whisper-1, gpt-4o-transcribe"), std::string::npos);
  const ApiError format =
      Refusal({{"file", "x"}, {"model", "whisper-1"}, {"response_format", "diarized_json"}});
  EXPECT_EQ(format.param, "response_format");
  EXPECT_EQ(format.http_status, 400);
  EXPECT_EQ(Refusal({{"file", "x"}, {"model", "whisper-1"}, {"stream", "maybe"}}).param, "stream");
  EXPECT_EQ(Refusal({{"file", "x"},
                     {"model", "whisper-1"},
                     {"response_format", "srt"},
                     {"stream", "true"}})
                .param,
            "stream");
  EXPECT_EQ(Refusal({{"file", "x"}, {"model", "whisper-1"}, {"timestamp_granularities[]", "word"}})
                .param,
            "timestamp_granularities");
  EXPECT_EQ(Refusal({{"file", "x"},
                     {"model", "whisper-1"},
                     {"response_format", "verbose_json"},
                     {"timestamp_granularities[]", "phoneme"}})
                .param,
            "timestamp_granularities");
  EXPECT_EQ(Refusal({{"file", "x"}, {"model", "whisper-1"}, {"language", "fr"}}).param,
            "language");
  EXPECT_EQ(Refusal({{"file", "x"}, {"model", "whisper-1"}, {"temperature", "2"}}).param,
            "temperature");
}

TEST(TranscriptionRequestTest, UploadsOverTheCapAre413) {
  const ApiError big =
      Refusal({{"model", "whisper-1"}, {"file", std::string(kMaxUploadBytes + 1, 'a')}});
  EXPECT_EQ(big.http_status, 413);
  EXPECT_EQ(big.param, "file");
  auto at_cap = ParseTranscriptionRequest(
      kType, Form({{"model", "whisper-1"}, {"file", std::string(kMaxUploadBytes, 'a')}}), kModels);
  EXPECT_TRUE(std::holds_alternative<TranscriptionRequest>(at_cap));
}

TEST(TranscriptionRequestTest, NotAForm) {
  auto parsed = ParseTranscriptionRequest("application/json", "{\"model\": \"whisper-1\"}", kModels);
  ASSERT_TRUE(std::holds_alternative<ApiError>(parsed));
  EXPECT_EQ(std::get<ApiError>(parsed).http_status, 400);
  EXPECT_NE(std::get<ApiError>(parsed).message.find("multipart/form-data"), std::string::npos);
}

}  // namespace
}  // namespace omnistage
