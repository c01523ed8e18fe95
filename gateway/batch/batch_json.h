// The Batch API's objects in OpenAI's shapes (docs/openai.md, "Batches"):
// a Batch, a list of them, and the request a create names.
//
//   std::variant<BatchCreate, ApiError> create = ParseBatchCreate(body);
//   std::string json = BatchJson(stored_batch);
#ifndef OMNISTAGE_GATEWAY_BATCH_BATCH_JSON_H_
#define OMNISTAGE_GATEWAY_BATCH_BATCH_JSON_H_

#include <string>
#include <variant>
#include <vector>

#include "absl/strings/string_view.h"
#include "gateway/batch/batch_input.h"
#include "gateway/batch/batch_store.h"
#include "gateway/http/api_error.h"

namespace omnistage {

// POST /v1/batches's body.
struct BatchCreate {
  std::string input_file_id;
  std::string endpoint;
  std::string completion_window;
  std::string metadata = "null";  // a JSON object of up to 16 string values
};

// 400 naming the field at fault: input_file_id, endpoint (one of the batch
// endpoints), completion_window (a duration, 1s to 168h), metadata.
std::variant<BatchCreate, ApiError> ParseBatchCreate(absl::string_view body);

// {"id", "object": "batch", "endpoint", "errors": null, "input_file_id",
// "completion_window", "status", "output_file_id", "error_file_id",
// "created_at", "in_progress_at", "expires_at", "finalizing_at",
// "completed_at", "failed_at", "expired_at", "cancelling_at",
// "cancelled_at", "request_counts": {"total", "completed", "failed"},
// "metadata"}; times not reached and files not written are null.
std::string BatchJson(const StoredBatch& batch);
// {"object": "list", "data": [batches], "first_id", "last_id", "has_more"}.
std::string BatchListJson(const std::vector<StoredBatch>& batches, bool has_more);
// The 400 for an input file that cannot run: the input error's message,
// code and line, param input_file_id.
ApiError InputFileError(const BatchInputError& error);

}  // namespace omnistage

#endif  // OMNISTAGE_GATEWAY_BATCH_BATCH_JSON_H_
