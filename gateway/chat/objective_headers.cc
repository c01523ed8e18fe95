#include "gateway/chat/objective_headers.h"

#include <algorithm>
#include <cstdint>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/criticality.h"
#include "common/limits.h"

namespace omnistage {
namespace {

// The 400 for header `header` with `value`, which `expected` says is wrong.
ApiError InvalidHeader(const char* header, const std::string& value, absl::string_view expected) {
  return InvalidRequest(
      header,
      absl::StrCat("Invalid '", header, "' header: expected ", expected, ", got '",
                   value.size() > 32 ? value.substr(0, 32) + "..." : value, "'."),
      "invalid_value");
}

// The header's milliseconds, or the error naming it.
std::optional<ApiError> ReadMs(const char* header, const std::string& value, uint32_t* ms) {
  *ms = 0;
  if (value.empty()) return std::nullopt;
  uint64_t parsed = 0;
  const bool digits = std::all_of(value.begin(), value.end(), [](char c) {
    return absl::ascii_isdigit(static_cast<unsigned char>(c));
  });
  if (!digits || !absl::SimpleAtoi(value, &parsed) || parsed < 1 || parsed > kMaxObjectiveMs) {
    return InvalidHeader(
        header, value, absl::StrCat("a whole number of milliseconds from 1 to ", kMaxObjectiveMs));
  }
  *ms = static_cast<uint32_t>(parsed);
  return std::nullopt;
}

}  // namespace

std::optional<ApiError> ReadObjectiveHeaders(const ObjectiveHeaderValues& values,
                                             v1::GenerateRequest* request) {
  uint32_t first_output = 0;
  uint32_t between_outputs = 0;
  uint32_t first_audio = 0;
  if (auto error = ReadMs(kSloTtftHeader, values.ttft_ms, &first_output)) return error;
  if (auto error = ReadMs(kSloTpotHeader, values.tpot_ms, &between_outputs)) return error;
  if (auto error = ReadMs(kSloTtfaHeader, values.ttfa_ms, &first_audio)) return error;
  std::optional<v1::Criticality> criticality;
  if (!values.criticality.empty()) {
    criticality = ParseCriticality(values.criticality);
    if (!criticality.has_value()) {
      return InvalidHeader(kSloCriticalityHeader, values.criticality,
                           "critical, standard or sheddable");
    }
  }
  if (first_output > 0) request->mutable_objectives()->set_first_output_ms(first_output);
  if (between_outputs > 0) request->mutable_objectives()->set_between_outputs_ms(between_outputs);
  if (first_audio > 0) request->mutable_objectives()->set_first_audio_ms(first_audio);
  if (criticality.has_value()) request->mutable_objectives()->set_criticality(*criticality);
  return std::nullopt;
}

}  // namespace omnistage
