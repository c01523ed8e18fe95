#include "gateway/speech/speech_request.h"

#include <algorithm>
#include <optional>
#include <variant>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gateway/audio/audio_encoder.h"
#include "gateway/chat/chat_request.h"
#include "gateway/http/json_body.h"
#include "nlohmann/json.hpp"

namespace omnistage {
namespace {

using nlohmann::json;
using Part = std::optional<ApiError>;

// Characters (code points) of UTF-8 `text`.
size_t CodePoints(const std::string& text) {
  return static_cast<size_t>(std::count_if(text.begin(), text.end(), [](char c) {
    return (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  }));
}

Part Missing(const std::string& param) {
  return InvalidRequest(param, absl::StrCat("Missing required parameter: '", param, "'."));
}

Part ReadModel(const json& body, const SpeechModels& models) {
  auto it = body.find("model");
  if (it == body.end() || it->is_null()) return Missing("model");
  if (!it->is_string()) return WrongTypeError("model", "a string", *it);
  const std::string name = it->get<std::string>();
  if (std::find(models.names.begin(), models.names.end(), name) != models.names.end()) {
    return std::nullopt;
  }
  return ApiError{
      404,
      "invalid_request_error",
      absl::StrCat("The model '", name, "' does not exist or does not speak; this ",
                   "gateway's speech models are: ", absl::StrJoin(models.names, ", "), "."),
      "model",
      "model_not_found",
      std::nullopt};
}

Part ReadInput(const json& body, SpeechRequest* request) {
  auto it = body.find("input");
  if (it == body.end() || it->is_null()) return Missing("input");
  if (!it->is_string()) return WrongTypeError("input", "a string", *it);
  const std::string input = it->get<std::string>();
  const size_t chars = CodePoints(input);
  if (chars == 0) {
    return InvalidRequest("input",
                          "Invalid 'input': empty string. Expected a string with minimum length 1, "
                          "but got an empty string instead.",
                          "empty_string");
  }
  if (chars > kMaxSpeechInputChars) {
    return InvalidRequest(
        "input",
        absl::StrCat("Invalid 'input': string too long. Expected a string with "
                     "maximum length ",
                     kMaxSpeechInputChars, ", but got a string with length ", chars, " instead."),
        "string_above_max_length");
  }
  request->generate.set_prompt(input);
  return std::nullopt;
}

Part ReadVoice(const json& body, SpeechRequest* request) {
  auto it = body.find("voice");
  if (it == body.end() || it->is_null()) return Missing("voice");
  if (!it->is_string()) return WrongTypeError("voice", "a string", *it);
  request->voice = it->get<std::string>();
  if (request->voice.empty()) {
    return InvalidRequest("voice", "Invalid 'voice': empty string.", "empty_string");
  }
  return std::nullopt;
}

Part ReadFormat(const json& body, SpeechRequest* request) {
  auto it = body.find("response_format");
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (!it->is_string()) return WrongTypeError("response_format", "a string", *it);
  const std::string format = it->get<std::string>();
  const std::vector<std::string>& served = ServedAudioFormats();
  if (std::find(served.begin(), served.end(), format) == served.end()) {
    return InvalidRequest(
        "response_format",
        absl::StrCat("Invalid value: '", format, "'. This server's speech formats are: '",
                     absl::StrJoin(served, "', '"), "'",
                     format == "aac" ? " (no AAC encoder it can use is packaged)" : "", "."),
        "unsupported_value");
  }
  request->format = format;
  return std::nullopt;
}

Part ReadSpeed(const json& body, SpeechRequest* request) {
  auto it = body.find("speed");
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (!it->is_number()) return WrongTypeError("speed", "a number", *it);
  const double speed = it->get<double>();
  if (!(speed >= 0.25 && speed <= 4.0)) {
    return OutOfRangeError(
        "speed", absl::StrCat("expected a value in [0.25, 4], but got ", speed, " instead"));
  }
  request->speed = speed;
  return std::nullopt;
}

Part ReadStreamFormat(const json& body, SpeechRequest* request) {
  auto it = body.find("stream_format");
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (!it->is_string()) return WrongTypeError("stream_format", "a string", *it);
  if (*it == "sse") {
    request->sse = true;
  } else if (*it != "audio") {
    return InvalidRequest("stream_format",
                          absl::StrCat("Invalid value: '", it->get<std::string>(),
                                       "'. Supported values are: 'audio' and 'sse'."),
                          "invalid_value");
  }
  return std::nullopt;
}

Part ReadInstructions(const json& body) {
  auto it = body.find("instructions");
  if (it == body.end() || it->is_null() || it->is_string()) return std::nullopt;
  return WrongTypeError("instructions", "a string", *it);
}

}  // namespace

std::variant<SpeechRequest, ApiError> ParseSpeechRequest(const std::string& body,
                                                         const SpeechModels& models) {
  std::variant<json, ApiError> read = ReadJsonBody(body);
  if (auto* error = std::get_if<ApiError>(&read)) return *error;
  const json& parsed = std::get<json>(read);
  SpeechRequest request;
  for (Part error :
       {ReadModel(parsed, models), ReadInput(parsed, &request), ReadVoice(parsed, &request),
        ReadFormat(parsed, &request), ReadSpeed(parsed, &request),
        ReadStreamFormat(parsed, &request), ReadInstructions(parsed)}) {
    if (error.has_value()) return *error;
  }
  request.generate.add_output_modalities(v1::MODALITY_AUDIO);
  v1::StageParameters* speaker = request.generate.add_stage_params();
  speaker->set_stage_id(models.voice_stage);
  (*speaker->mutable_extra())["voice"] = VoiceVariant(request.voice);
  if (request.speed != 1.0) (*speaker->mutable_extra())["speed"] = absl::StrCat(request.speed);
  return request;
}

}  // namespace omnistage
