// Fuzz target: the pipeline config loader (orchestrator/config/pipeline_config.h) on
// arbitrary text.
//
// Properties, for every input:
// - ParsePipelineConfig returns (no crash, no exception escapes, no hang);
// - an error is INVALID_ARGUMENT with a clear message: one line of printable
//   ASCII of bounded length that says where the problem is: a YAML syntax
//   error's line and column, "config" for the file as a whole, or the path of
//   a field of the documented schema (an unknown or repeated key names itself);
// - a config it accepts keeps every documented rule (stages, names, replicas,
//   addresses, ranges), so nothing downstream sees a config it cannot run.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/host_port.h"
#include "common/limits.h"
#include "fuzz/fuzz_check.h"
#include "orchestrator/config/pipeline_config.h"
#include "protos/orchestrator.pb.h"

namespace omnistage {
namespace {

// Longer messages are not read; a message this long quotes input unshortened.
constexpr size_t kMaxMessageBytes = 1024;

void CheckErrorMessage(const absl::Status& status) {
  FUZZ_CHECK(status.code() == absl::StatusCode::kInvalidArgument,
             "a config error must be INVALID_ARGUMENT: ", status.ToString());
  const absl::string_view message = status.message();
  FUZZ_CHECK(!message.empty(), "an empty config error");
  FUZZ_CHECK(message.size() <= kMaxMessageBytes, "a config error of ", message.size(),
             " bytes: ", message.substr(0, 200), "...");
  for (char c : message) {
    FUZZ_CHECK(absl::ascii_isprint(static_cast<unsigned char>(c)),
               "a config error must be one line of printable text (input is quoted escaped): ",
               absl::CHexEscape(message));
  }
  if (absl::StartsWith(message, "YAML syntax error at line ") ||
      absl::StartsWith(message, "config: ")) {
    return;
  }
  const size_t colon = message.find(": ");
  FUZZ_CHECK(colon != absl::string_view::npos, "a config error names no field: ", message);
  const absl::string_view path = message.substr(0, colon);
  // An unknown or repeated key is named by its own path.
  if (absl::StrContains(message, ": unknown key (known: ") ||
      absl::EndsWith(message, ": given twice")) {
    return;
  }
  const std::string top(path.substr(0, path.find_first_of(".[")));
  const std::vector<std::string>& keys = PipelineConfigTopKeys();
  FUZZ_CHECK(std::find(keys.begin(), keys.end(), top) != keys.end(),
             "a config error names no field of the schema: ", message);
}

bool IsNameChar(char c) {
  return absl::ascii_islower(static_cast<unsigned char>(c)) ||
         absl::ascii_isdigit(static_cast<unsigned char>(c)) || c == '_' || c == '-';
}

void CheckDuration(absl::Duration d, absl::Duration min, const char* what) {
  FUZZ_CHECK(d >= min && d <= absl::Hours(24), what, " out of range: ", absl::FormatDuration(d));
}

void CheckAccepted(const PipelineConfig& config) {
  FUZZ_CHECK(!config.stages.empty() && config.stages.size() <= 64, config.stages.size(),
             " stages accepted");
  FUZZ_CHECK(config.stages.back().final_output, "the last stage is not final_output");
  CheckDuration(config.keepalive_time, absl::Milliseconds(100), "keepalive_ms");
  CheckDuration(config.keepalive_timeout, absl::Milliseconds(100), "keepalive_timeout_ms");
  CheckDuration(config.request_idle_timeout, absl::ZeroDuration(), "request_idle_timeout_ms");
  CheckDuration(config.reconnect_initial_backoff, absl::Milliseconds(1),
                "reconnect_initial_backoff_ms");
  CheckDuration(config.reconnect_max_backoff, config.reconnect_initial_backoff,
                "reconnect_max_backoff_ms");
  CheckDuration(config.drain_timeout, absl::ZeroDuration(), "drain_timeout_ms");
  CheckDuration(config.worker_abort_timeout, absl::Milliseconds(1), "worker_abort_timeout_ms");
  FUZZ_CHECK(config.max_in_flight >= 1, "max_in_flight ", config.max_in_flight);
  // Peers: a list or a name, never both; their calls end within the timeout.
  FUZZ_CHECK(config.peers.addresses.empty() || !config.peers.discovery.has_value(),
             "peers with both addresses and discovery");
  CheckDuration(config.peer_timeout, absl::Milliseconds(1), "peers.timeout_ms");
  // Objectives: each within ten minutes, a criticality among the three (or none).
  for (uint32_t ms : {config.objectives.first_output_ms, config.objectives.first_audio_ms,
                      config.objectives.between_outputs_ms}) {
    FUZZ_CHECK(ms <= kMaxObjectiveMs, "an objective of ", ms, " ms accepted");
  }
  FUZZ_CHECK(v1::Criticality_IsValid(config.objectives.criticality), "criticality ",
             static_cast<int>(config.objectives.criticality));
  FUZZ_CHECK(
      config.max_prompt_bytes >= 1 && static_cast<int64_t>(config.max_prompt_bytes) <=
                                          kDefaultWorkerMaxMessageBytes - kAddRequestEnvelopeBytes,
      "max_prompt_bytes ", config.max_prompt_bytes, " would not fit a worker's message");
  FUZZ_CHECK(config.max_client_queued_bytes >= (1u << 20) &&
                 config.max_client_queued_bytes <= (size_t{1} << 30),
             "max_client_queued_bytes ", config.max_client_queued_bytes);
  std::set<std::string> names;
  std::set<std::string> addresses;
  for (size_t i = 0; i < config.stages.size(); ++i) {
    const StageConfig& stage = config.stages[i];
    FUZZ_CHECK(stage.id == static_cast<int>(i) && stage.defaults.stage_id() == stage.id, "stage ",
               i, " has id ", stage.id, " and defaults for ", stage.defaults.stage_id());
    FUZZ_CHECK(!stage.name.empty() && stage.name.size() <= 64 &&
                   std::all_of(stage.name.begin(), stage.name.end(), IsNameChar),
               "stage name '", absl::CHexEscape(stage.name), "'");
    FUZZ_CHECK(names.insert(stage.name).second, "stage name '", stage.name, "' twice");
    const int sources =
        (stage.spawn_replicas > 0) + !stage.addresses.empty() + stage.discovery.has_value();
    FUZZ_CHECK(sources == 1, "stage ", i, " has ", sources, " replica sources");
    FUZZ_CHECK(stage.spawn_replicas >= 0 && stage.spawn_replicas <= 256, "replicas ",
               stage.spawn_replicas);
    FUZZ_CHECK(stage.spawn_replicas > 0 || stage.engine_params.empty(),
               "engine_params accepted for workers it does not spawn");
    if (stage.spawn_replicas > 0) {
      FUZZ_CHECK(!stage.engine.empty(), "a spawned stage without an engine");
      for (const auto& [key, value] : stage.engine_params) {
        FUZZ_CHECK(!absl::StrContains(value, ','), "engine_params.", key,
                   " holds a ',' (it goes on a key=value,... command line)");
      }
    }
    for (const std::string& address : stage.addresses) {
      FUZZ_CHECK(addresses.insert(address).second, "address ", address, " used twice");
      FUZZ_CHECK(ParseHostPort(address, PortRule::kDial).ok(), "address '",
                 absl::CHexEscape(address), "' is not host:port");
    }
    if (stage.discovery.has_value()) {
      FUZZ_CHECK(!stage.discovery->name.empty() && stage.discovery->port >= 1 &&
                     stage.discovery->port <= 65535,
                 "discovery ", stage.discovery->name, ":", stage.discovery->port);
      CheckDuration(stage.discovery->refresh, absl::Milliseconds(100), "refresh_ms");
    }
    FUZZ_CHECK(stage.output_modality == v1::MODALITY_TEXT ||
                   stage.output_modality == v1::MODALITY_AUDIO ||
                   stage.output_modality == v1::MODALITY_TOKENS,
               "output_modality ", stage.output_modality);
    const v1::StageParameters& d = stage.defaults;
    FUZZ_CHECK(!d.has_max_tokens() || (d.max_tokens() >= 1 && d.max_tokens() <= kMaxTokensLimit),
               "defaults.max_tokens ", d.max_tokens());
    FUZZ_CHECK(!d.has_temperature() || (std::isfinite(d.temperature()) && d.temperature() >= 0 &&
                                        d.temperature() <= 100),
               "defaults.temperature ", d.temperature());
  }
}

}  // namespace
}  // namespace omnistage

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<omnistage::PipelineConfig> config = omnistage::ParsePipelineConfig(text);
  if (config.ok()) {
    omnistage::CheckAccepted(*config);
  } else {
    omnistage::CheckErrorMessage(config.status());
  }
  return 0;
}
