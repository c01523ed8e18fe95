#include "orchestrator/config/pipeline_limits.h"

#include <cstdint>
#include <string>
#include <vector>

#include "common/limits.h"
#include "orchestrator/config/yaml_fields.h"

namespace omnistage {
namespace {

const std::vector<std::string> kLimitsKeys = {"max_in_flight",
                                              "max_prompt_bytes",
                                              "max_client_queued_bytes",
                                              "max_in_flight_per_identity",
                                              "max_streams_per_connection",
                                              "min_client_ping_interval_ms",
                                              "max_connection_age_ms",
                                              "max_connection_age_grace_ms",
                                              "max_queued",
                                              "max_queue_ms",
                                              "admission_headroom",
                                              "max_replay_bytes",
                                              "max_input_chunk_bytes",
                                              "max_input_bytes",
                                              "input_idle_ms",
                                              "batch_reserve"};

// A prompt travels to stage 0 inside one AddRequest, which a worker accepts only
// up to its message limit (16 MiB by default): a larger limit here would let one
// request break a worker session.
constexpr int64_t kMaxPromptBytes = kDefaultWorkerMaxMessageBytes - kAddRequestEnvelopeBytes;

}  // namespace

absl::Status ReadLimits(const YAML::Node& node, PipelineConfig* config) {
  yaml::Fields limits(node, "limits", kLimitsKeys);
  int64_t max_in_flight = config->max_in_flight;
  int64_t max_prompt_bytes = static_cast<int64_t>(config->max_prompt_bytes);
  int64_t max_client_queued_bytes = static_cast<int64_t>(config->max_client_queued_bytes);
  int64_t per_identity = config->max_in_flight_per_identity;
  int64_t streams = config->max_streams_per_connection;
  int64_t max_queued = config->max_queued;
  int64_t headroom = config->admission_headroom;
  limits.Int("max_in_flight", 1, yaml::kNoMax, &max_in_flight);
  limits.Int("max_prompt_bytes", 1, kMaxPromptBytes, &max_prompt_bytes);
  // At least one whole response (1 MiB) must fit; at most 1 GiB.
  limits.Int("max_client_queued_bytes", 1 << 20, int64_t{1} << 30, &max_client_queued_bytes);
  limits.Int("max_in_flight_per_identity", 0, yaml::kNoMax, &per_identity);
  limits.Int("max_streams_per_connection", 1, 1 << 20, &streams);
  limits.Int("max_queued", 0, 1 << 20, &max_queued);
  limits.Millis("max_queue_ms", 1, &config->max_queue_wait);
  limits.Int("admission_headroom", 0, 1 << 10, &headroom);
  limits.Number("batch_reserve", 0, 1, &config->batch_reserve);
  // At least a prompt's worth; at most 1 GiB per request.
  limits.Int("max_replay_bytes", 1024, int64_t{1} << 30, &config->max_replay_bytes);
  // Streamed input: a chunk must fit the AppendInput a worker accepts; a
  // request's whole input at most 1 GiB.
  limits.Int("max_input_chunk_bytes", 1, kMaxPromptBytes, &config->max_input_chunk_bytes);
  limits.Int("max_input_bytes", 1, int64_t{1} << 30, &config->max_input_bytes);
  limits.Millis("input_idle_ms", 1, &config->input_idle_timeout);
  // Pings closer than 100 ms would cost more than they tell.
  limits.Millis("min_client_ping_interval_ms", 100, &config->min_client_ping_interval);
  limits.Millis("max_connection_age_ms", 0, &config->max_connection_age);
  limits.Millis("max_connection_age_grace_ms", 0, &config->max_connection_age_grace);
  if (!limits.status().ok()) return limits.status();
  if (max_in_flight < per_identity) {
    return yaml::Invalid("limits.max_in_flight_per_identity",
                         absl::StrCat("must be <= max_in_flight (", max_in_flight, "), got ",
                                      per_identity));
  }
  config->max_in_flight = static_cast<int>(max_in_flight);
  config->max_prompt_bytes = static_cast<size_t>(max_prompt_bytes);
  config->max_client_queued_bytes = static_cast<size_t>(max_client_queued_bytes);
  config->max_in_flight_per_identity = static_cast<int>(per_identity);
  config->max_streams_per_connection = static_cast<int>(streams);
  config->max_queued = static_cast<int>(max_queued);
  config->admission_headroom = static_cast<int>(headroom);
  return absl::OkStatus();
}

}  // namespace omnistage
