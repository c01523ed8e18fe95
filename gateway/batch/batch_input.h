// BatchInput: a Batch API input file (docs/openai.md, "Batches") read and
// checked when the batch is created, so that a file that cannot run starts
// nothing. One JSON object a line:
//   {"custom_id": "q-1", "method": "POST", "url": "/v1/chat/completions",
//    "body": {"model": "omni-demo", "messages": [...]}}
// Every line must parse, carry a non-empty custom_id unique in the file, POST
// to the batch's endpoint and hold a body object; blank lines are skipped.
// What a body asks is checked when its line runs (a bad one fails alone,
// into the error file).
//
//   std::variant<std::vector<BatchInputLine>, BatchInputError> lines =
//       ParseBatchInput(content, "/v1/chat/completions", 50000);
#ifndef OMNISTAGE_GATEWAY_BATCH_BATCH_INPUT_H_
#define OMNISTAGE_GATEWAY_BATCH_BATCH_INPUT_H_

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "absl/strings/string_view.h"

namespace omnistage {

struct BatchInputLine {
  int64_t line = 0;  // 1-based, as an editor counts the file's lines
  std::string custom_id;
  std::string body;  // the body object's JSON
};

// Why the file cannot run: OpenAI's batch error fields.
struct BatchInputError {
  // invalid_json_line, missing_required_parameter, invalid_request,
  // mismatched_endpoint, invalid_method, duplicate_custom_id,
  // too_many_requests, empty_file.
  std::string code;
  std::string message;
  std::string param;  // the line's field at fault; "" for none
  int64_t line = 0;   // 0: the file as a whole
};

// The endpoints a batch may name.
bool IsBatchEndpoint(absl::string_view endpoint);

std::variant<std::vector<BatchInputLine>, BatchInputError> ParseBatchInput(
    absl::string_view content, absl::string_view endpoint, int64_t max_lines);

}  // namespace omnistage

#endif  // OMNISTAGE_GATEWAY_BATCH_BATCH_INPUT_H_
