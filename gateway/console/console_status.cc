#include "gateway/console/console_status.h"

#include "google/protobuf/util/json_util.h"
#include "nlohmann/json.hpp"

namespace omnistage {

std::string ConsoleStatusJson(const v1::PipelineStatus& pipeline, const ServedRequests& served,
                              const std::vector<StoredBatch>* batches) {
  google::protobuf::util::JsonPrintOptions options;
  options.always_print_primitive_fields = true;
  std::string pipeline_json;
  // A message the gateway itself decoded always prints.
  (void)google::protobuf::util::MessageToJsonString(pipeline, &pipeline_json, options);
  nlohmann::json recent = nlohmann::json::array();
  for (const ServedRequest& request : served.newest_first()) {
    recent.push_back({{"requestId", request.request_id},
                      {"outcome", request.outcome},
                      {"error", request.error},
                      {"httpStatus", request.http_status},
                      {"durationSeconds", request.duration_seconds},
                      {"finishedUnixMs", request.finished_unix_ms},
                      {"firstAudioSeconds", request.first_audio_seconds},
                      {"playbackStalls", request.playback_stalls},
                      {"stalledSeconds", request.stalled_seconds}});
  }
  nlohmann::json running;  // null without a store
  if (batches != nullptr) {
    running = nlohmann::json::array();
    for (const StoredBatch& batch : *batches) {
      running.push_back({{"id", batch.id},
                         {"owner", batch.owner},
                         {"endpoint", batch.endpoint},
                         {"status", batch.status},
                         {"createdAt", batch.created_at},
                         {"total", batch.total},
                         {"completed", batch.completed},
                         {"failed", batch.failed}});
    }
  }
  nlohmann::json body = {
      {"pipeline", nlohmann::json::parse(pipeline_json)},
      {"gateway", {{"servedTotal", served.total()}, {"recent", std::move(recent)}}},
      {"batches", std::move(running)}};
  // Error text from the pipeline may hold any bytes: replaced, not thrown on.
  return body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace omnistage
