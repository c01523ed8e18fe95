#include "gateway/batch/batch_json.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gateway/http/json_body.h"
#include "nlohmann/json.hpp"

namespace omnistage {
namespace {

// OpenAI's limits on a batch's metadata.
constexpr size_t kMaxMetadataKeys = 16;
constexpr size_t kMaxMetadataKeyBytes = 64;
constexpr size_t kMaxMetadataValueBytes = 512;

nlohmann::json Time(int64_t seconds) {
  return seconds > 0 ? nlohmann::json(seconds) : nlohmann::json();
}

nlohmann::json Id(const std::string& id) {
  return id.empty() ? nlohmann::json() : nlohmann::json(id);
}

nlohmann::json BatchObject(const StoredBatch& batch) {
  return {{"id", batch.id},
          {"object", "batch"},
          {"endpoint", batch.endpoint},
          {"errors", nullptr},
          {"input_file_id", batch.input_file_id},
          {"completion_window", batch.completion_window},
          {"status", batch.status},
          {"output_file_id", Id(batch.output_file_id)},
          {"error_file_id", Id(batch.error_file_id)},
          {"created_at", batch.created_at},
          {"in_progress_at", Time(batch.in_progress_at)},
          {"expires_at", Time(batch.expires_at)},
          {"finalizing_at", Time(batch.finalizing_at)},
          {"completed_at", Time(batch.completed_at)},
          {"failed_at", nullptr},
          {"expired_at", Time(batch.expired_at)},
          {"cancelling_at", Time(batch.cancelling_at)},
          {"cancelled_at", Time(batch.cancelled_at)},
          {"request_counts",
           {{"total", batch.total}, {"completed", batch.completed}, {"failed", batch.failed}}},
          {"metadata", nlohmann::json::parse(batch.metadata, nullptr, false)}};
}

}  // namespace

std::variant<BatchCreate, ApiError> ParseBatchCreate(absl::string_view body) {
  std::variant<nlohmann::json, ApiError> parsed = ReadJsonBody(std::string(body));
  if (std::holds_alternative<ApiError>(parsed)) return std::get<ApiError>(parsed);
  const nlohmann::json& json = std::get<nlohmann::json>(parsed);
  BatchCreate create;
  for (auto [field, value] :
       {std::pair<const char*, std::string*>{"input_file_id", &create.input_file_id},
        {"endpoint", &create.endpoint},
        {"completion_window", &create.completion_window}}) {
    const auto it = json.find(field);
    if (it == json.end() || !it->is_string() || it->get_ref<const std::string&>().empty()) {
      return InvalidRequest(field, absl::StrCat("Missing required parameter: '", field, "'."));
    }
    *value = it->get<std::string>();
  }
  if (!IsBatchEndpoint(create.endpoint)) {
    return InvalidRequest("endpoint", absl::StrCat("Invalid 'endpoint': '", create.endpoint,
                                                   "'. A batch runs /v1/chat/completions or "
                                                   "/v1/audio/speech."));
  }
  if (absl::StatusOr<absl::Duration> window = ParseCompletionWindow(create.completion_window);
      !window.ok()) {
    return InvalidRequest("completion_window", std::string(window.status().message()));
  }
  if (const auto metadata = json.find("metadata"); metadata != json.end() && !metadata->is_null()) {
    bool valid = metadata->is_object() && metadata->size() <= kMaxMetadataKeys;
    for (auto it = metadata->begin(); valid && it != metadata->end(); ++it) {
      valid = it.key().size() <= kMaxMetadataKeyBytes && it->is_string() &&
              it->get_ref<const std::string&>().size() <= kMaxMetadataValueBytes;
    }
    if (!valid) {
      return InvalidRequest(
          "metadata", absl::StrCat("Invalid 'metadata': an object of up to ", kMaxMetadataKeys,
                                   " string values (keys up to ", kMaxMetadataKeyBytes,
                                   " bytes, values up to ", kMaxMetadataValueBytes, ")."));
    }
    create.metadata = metadata->dump();
  }
  return create;
}

std::string BatchJson(const StoredBatch& batch) { return BatchObject(batch).dump(); }

std::string BatchListJson(const std::vector<StoredBatch>& batches, bool has_more) {
  nlohmann::json data = nlohmann::json::array();
  for (const StoredBatch& batch : batches) data.push_back(BatchObject(batch));
  nlohmann::json list = {{"object", "list"}, {"data", std::move(data)}, {"has_more", has_more}};
  list["first_id"] = batches.empty() ? nlohmann::json() : nlohmann::json(batches.front().id);
  list["last_id"] = batches.empty() ? nlohmann::json() : nlohmann::json(batches.back().id);
  return list.dump();
}

ApiError InputFileError(const BatchInputError& error) {
  return InvalidRequest("input_file_id", error.message, error.code);
}

}  // namespace omnistage
