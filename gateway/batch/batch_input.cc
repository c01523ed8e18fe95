#include "gateway/batch/batch_input.h"

#include <unordered_set>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"

namespace omnistage {
namespace {

// The longest custom_id taken (OpenAI's ids are short; a key, not content).
constexpr size_t kMaxCustomIdBytes = 512;

BatchInputError LineError(int64_t line, std::string code, std::string message, std::string param) {
  return BatchInputError{std::move(code), absl::StrCat("Line ", line, ": ", message),
                         std::move(param), line};
}

}  // namespace

bool IsBatchEndpoint(absl::string_view endpoint) {
  return endpoint == "/v1/chat/completions" || endpoint == "/v1/audio/speech";
}

std::variant<std::vector<BatchInputLine>, BatchInputError> ParseBatchInput(
    absl::string_view content, absl::string_view endpoint, int64_t max_lines) {
  std::vector<BatchInputLine> lines;
  std::unordered_set<std::string> custom_ids;
  int64_t number = 0;
  for (absl::string_view text : absl::StrSplit(content, '\n')) {
    ++number;
    if (absl::StripAsciiWhitespace(text).empty()) continue;
    const nlohmann::json line = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (line.is_discarded() || !line.is_object()) {
      return LineError(number, "invalid_json_line", "not a JSON object.", "");
    }
    const auto custom_id = line.find("custom_id");
    if (custom_id == line.end() || !custom_id->is_string() ||
        custom_id->get_ref<const std::string&>().empty()) {
      return LineError(number, "missing_required_parameter",
                       "'custom_id' must be a non-empty string.", "custom_id");
    }
    const std::string& id = custom_id->get_ref<const std::string&>();
    if (id.size() > kMaxCustomIdBytes) {
      return LineError(number, "invalid_request",
                       absl::StrCat("'custom_id' is ", id.size(), " bytes; at most ",
                                    kMaxCustomIdBytes, " are taken."),
                       "custom_id");
    }
    const auto method = line.find("method");
    if (method == line.end() || !method->is_string() || *method != "POST") {
      return LineError(number, "invalid_method", "'method' must be \"POST\".", "method");
    }
    const auto url = line.find("url");
    if (url == line.end() || !url->is_string() || url->get_ref<const std::string&>() != endpoint) {
      return LineError(
          number, "mismatched_endpoint",
          absl::StrCat("'url' must be the batch's endpoint, \"", endpoint, "\"",
                       url != line.end() && url->is_string()
                           ? absl::StrCat(", not \"", url->get_ref<const std::string&>(), "\".")
                           : "."),
          "url");
    }
    const auto body = line.find("body");
    if (body == line.end() || !body->is_object()) {
      return LineError(number, "missing_required_parameter", "'body' must be a JSON object.",
                       "body");
    }
    if (!custom_ids.insert(id).second) {
      return LineError(number, "duplicate_custom_id",
                       absl::StrCat("the custom_id '", id, "' is on an earlier line too."),
                       "custom_id");
    }
    if (static_cast<int64_t>(lines.size()) == max_lines) {
      return BatchInputError{
          "too_many_requests",
          absl::StrCat("The file has more than ", max_lines, " requests, the most a batch takes."),
          "", 0};
    }
    lines.push_back(BatchInputLine{number, id, body->dump()});
  }
  if (lines.empty()) {
    return BatchInputError{"empty_file", "The file holds no requests.", "", 0};
  }
  return lines;
}

}  // namespace omnistage
