#include "gateway/transcription/transcription_request.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gateway/http/multipart.h"

namespace omnistage {
namespace {

using Part = std::optional<ApiError>;

constexpr const char* kFormats[] = {"json", "text", "verbose_json", "srt", "vtt"};

Part Missing(const std::string& param) {
  return InvalidRequest(param, absl::StrCat("Missing required parameter: '", param, "'."));
}

// The field's value, whitespace stripped; nullopt when absent.
std::optional<std::string> Field(const std::vector<FormPart>& parts, absl::string_view name) {
  const FormPart* part = FindPart(parts, name);
  if (part == nullptr) return std::nullopt;
  return std::string(absl::StripAsciiWhitespace(part->body));
}

Part ReadModel(const std::vector<FormPart>& parts, const std::vector<std::string>& models,
               TranscriptionRequest* request) {
  std::optional<std::string> model = Field(parts, "model");
  if (!model.has_value() || model->empty()) return Missing("model");
  if (std::find(models.begin(), models.end(), *model) == models.end()) {
    return ApiError{404,
                    "invalid_request_error",
                    absl::StrCat("The model '", *model,
                                 "' does not exist or does not transcribe; this gateway's "
                                 "transcription models are: ",
                                 absl::StrJoin(models, ", "), "."),
                    "model",
                    "model_not_found",
                    std::nullopt};
  }
  request->model = *std::move(model);
  return std::nullopt;
}

Part ReadFormat(const std::vector<FormPart>& parts, TranscriptionRequest* request) {
  std::optional<std::string> format = Field(parts, "response_format");
  if (!format.has_value() || format->empty()) return std::nullopt;
  if (std::find(std::begin(kFormats), std::end(kFormats), *format) == std::end(kFormats)) {
    return InvalidRequest("response_format",
                          absl::StrCat("Invalid 'response_format': '", *format,
                                       "'. Supported: ", absl::StrJoin(kFormats, ", "), "."));
  }
  request->format = *std::move(format);
  return std::nullopt;
}

Part ReadStream(const std::vector<FormPart>& parts, TranscriptionRequest* request) {
  std::optional<std::string> stream = Field(parts, "stream");
  if (!stream.has_value() || stream->empty() || *stream == "false") return std::nullopt;
  if (*stream != "true") {
    return InvalidRequest("stream",
                          absl::StrCat("Invalid 'stream': '", *stream, "'; expected true or false."));
  }
  if (request->format != "json" && request->format != "text") {
    return InvalidRequest("stream", absl::StrCat("Streaming is served for response_format json "
                                                 "and text, not ",
                                                 request->format, "."));
  }
  request->stream = true;
  return std::nullopt;
}

Part ReadGranularities(const std::vector<FormPart>& parts, TranscriptionRequest* request) {
  for (const FormPart& part : parts) {
    if (part.name != "timestamp_granularities[]" && part.name != "timestamp_granularities") {
      continue;
    }
    const std::string value(absl::StripAsciiWhitespace(part.body));
    if (value == "word") {
      request->words = true;
    } else if (value != "segment") {
      return InvalidRequest("timestamp_granularities",
                            absl::StrCat("Invalid 'timestamp_granularities': '", value,
                                         "'; expected segment or word."));
    }
  }
  if (request->words && request->format != "verbose_json") {
    return InvalidRequest("timestamp_granularities",
                          "timestamp_granularities needs response_format verbose_json.");
  }
  return std::nullopt;
}

Part ReadLanguage(const std::vector<FormPart>& parts) {
  std::optional<std::string> language = Field(parts, "language");
  if (!language.has_value() || language->empty() || absl::AsciiStrToLower(*language) == "en") {
    return std::nullopt;
  }
  return InvalidRequest("language", absl::StrCat("Unsupported language '", *language,
                                                 "': this gateway's recogniser hears English "
                                                 "only (en)."));
}

Part ReadTemperature(const std::vector<FormPart>& parts) {
  std::optional<std::string> temperature = Field(parts, "temperature");
  if (!temperature.has_value() || temperature->empty()) return std::nullopt;
  double value = 0;
  if (!absl::SimpleAtod(*temperature, &value) || value < 0 || value > 1) {
    return InvalidRequest("temperature",
                          absl::StrCat("Invalid 'temperature': '", *temperature,
                                       "'; expected a number from 0 to 1."));
  }
  return std::nullopt;
}

}  // namespace

std::variant<TranscriptionRequest, ApiError> ParseTranscriptionRequest(
    absl::string_view content_type, std::string body, const std::vector<std::string>& models) {
  absl::StatusOr<std::vector<FormPart>> parsed = ParseMultipart(content_type, body);
  if (!parsed.ok()) {
    return InvalidRequest("", absl::StrCat("Expected a multipart/form-data upload: ",
                                           parsed.status().message()));
  }
  std::vector<FormPart>& parts = *parsed;
  TranscriptionRequest request;
  for (Part error : {ReadModel(parts, models, &request), ReadFormat(parts, &request),
                     ReadStream(parts, &request), ReadGranularities(parts, &request),
                     ReadLanguage(parts), ReadTemperature(parts)}) {
    if (error.has_value()) return *std::move(error);
  }
  auto file = std::find_if(parts.begin(), parts.end(),
                           [](const FormPart& part) { return part.name == "file"; });
  if (file == parts.end()) return *Missing("file");
  if (file->body.size() > kMaxUploadBytes) {
    return ApiError{413,
                    "invalid_request_error",
                    absl::StrCat("Maximum content size limit (", kMaxUploadBytes,
                                 ") exceeded (", file->body.size(), " bytes read)."),
                    "file",
                    "file_too_large",
                    std::nullopt};
  }
  request.filename = std::move(file->filename);
  request.file = std::move(file->body);
  return request;
}

}  // namespace omnistage
