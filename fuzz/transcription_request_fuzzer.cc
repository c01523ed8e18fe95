// Fuzz target: the gateway's reading of an OpenAI transcription upload (POST
// /v1/audio/transcriptions, gateway/transcription/transcription_request.h) and,
// under it, of multipart/form-data bodies (gateway/http/multipart.h).
//
// The input: its first byte chooses how the rest is read. Bit 0 clear: the
// Content-Type is "multipart/form-data; boundary=B" and the rest is the body
// (most random Content-Types are refused before any part is read); bit 0 set:
// the rest's first line is the Content-Type and what follows it the body. Bit 1
// set: each '\n' of the body not after a '\r' becomes "\r\n", so that mutations
// make the line breaks multipart needs.
//
// Properties, for every input:
// - ParseTranscriptionRequest returns (no crash, no exception escapes, no hang);
// - a refusal is 400, 404 (naming `model`, code model_not_found) or 413
//   (naming `file`) of type invalid_request_error with a message, and its body
//   (ApiError::Json(), what the gateway answers) is a JSON object
//   {"error": {message, type, param, code}};
// - an accepted request came with a multipart/form-data Content-Type, names a
//   served model, has a format among json, text, verbose_json, srt and vtt,
//   streams only as json or text, asks for words only with verbose_json, and
//   carries a file of at most kMaxUploadBytes taken as is from the body.
#include <cstddef>
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/string_view.h"
#include "fuzz/fuzz_check.h"
#include "gateway/transcription/transcription_request.h"
#include "nlohmann/json.hpp"

namespace omnistage {
namespace {

const std::vector<std::string>& Models() {
  static const auto* const models = new std::vector<std::string>{"whisper-1", "gpt-4o-transcribe"};
  return *models;
}

void CheckRefusal(const ApiError& error) {
  FUZZ_CHECK(error.http_status == 400 || error.http_status == 404 || error.http_status == 413,
             "HTTP ", error.http_status, " for a bad upload");
  FUZZ_CHECK(
      error.http_status != 404 || (error.param == "model" && error.code == "model_not_found"),
      "a 404 about '", error.param, "', code '", error.code, "'");
  FUZZ_CHECK(error.http_status != 413 || error.param == "file", "a 413 about '", error.param, "'");
  FUZZ_CHECK(error.type == "invalid_request_error", "error type '", error.type, "'");
  FUZZ_CHECK(!error.message.empty(), "a refusal without a message");
  // Json() is what the gateway answers with: it must not throw (nlohmann's
  // dump throws on a string that is not UTF-8) and must be the error's shape.
  const std::string json = error.Json();
  const nlohmann::json body = nlohmann::json::parse(json, nullptr, false);
  FUZZ_CHECK(!body.is_discarded() && body.is_object() && body.contains("error") &&
                 body["error"].is_object(),
             "an error body that is not {\"error\": {...}}: ", json);
  for (const char* key : {"message", "type", "param", "code"}) {
    FUZZ_CHECK(body["error"].contains(key), "an error body without '", key, "'");
  }
}

void CheckAccepted(absl::string_view content_type, absl::string_view body,
                   const TranscriptionRequest& request) {
  const absl::string_view media = content_type.substr(0, content_type.find(';'));
  FUZZ_CHECK(absl::AsciiStrToLower(absl::StripAsciiWhitespace(media)) == "multipart/form-data",
             "accepted a Content-Type '", content_type, "'");
  bool served = false;
  for (const std::string& model : Models()) served = served || model == request.model;
  FUZZ_CHECK(served, "accepted model '", request.model, "'");
  const std::string& format = request.format;
  FUZZ_CHECK(format == "json" || format == "text" || format == "verbose_json" || format == "srt" ||
                 format == "vtt",
             "format '", format, "'");
  FUZZ_CHECK(!request.stream || format == "json" || format == "text", "a stream as ", format);
  FUZZ_CHECK(!request.words || format == "verbose_json", "words as ", format);
  FUZZ_CHECK(request.file.size() <= kMaxUploadBytes, "a file of ", request.file.size(), " bytes");
  FUZZ_CHECK(body.find(request.file) != absl::string_view::npos,
             "a file that is not the body's bytes");
}

}  // namespace
}  // namespace omnistage

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t choice = data[0];
  absl::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  std::string content_type = "multipart/form-data; boundary=B";
  if (choice & 1) {
    const size_t line_end = rest.find('\n');
    content_type = std::string(rest.substr(0, line_end));
    rest.remove_prefix(line_end == absl::string_view::npos ? rest.size() : line_end + 1);
  }
  std::string body;
  if (choice & 2) {
    body.reserve(rest.size() * 2);
    for (size_t i = 0; i < rest.size(); ++i) {
      if (rest[i] == '\n' && (i == 0 || rest[i - 1] != '\r')) body.push_back('\r');
      body.push_back(rest[i]);
    }
  } else {
    body = std::string(rest);
  }
  std::variant<omnistage::TranscriptionRequest, omnistage::ApiError> parsed =
      omnistage::ParseTranscriptionRequest(content_type, body, omnistage::Models());
  if (std::holds_alternative<omnistage::ApiError>(parsed)) {
    omnistage::CheckRefusal(std::get<omnistage::ApiError>(parsed));
  } else {
    omnistage::CheckAccepted(content_type, body, std::get<omnistage::TranscriptionRequest>(parsed));
  }
  return 0;
}
