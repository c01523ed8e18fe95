#include "orchestrator/config/pipeline_config.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/limits.h"
#include "common/modality.h"
#include "orchestrator/config/address_fields.h"
#include "orchestrator/config/pipeline_limits.h"
#include "orchestrator/config/pipeline_playback.h"
#include "orchestrator/config/pipeline_scaling.h"
#include "orchestrator/config/yaml_fields.h"
#include "yaml-cpp/depthguard.h"
#include "yaml-cpp/yaml.h"

namespace omnistage {
namespace {

using yaml::CheckOneDocument;
using yaml::Child;
using yaml::Expected;
using yaml::Fields;
using yaml::ForEachEntry;
using yaml::Invalid;
using yaml::ReadStringMap;
using yaml::YamlError;

// Configs are a few hundred bytes; the cap stops a wrong file (a log, a core dump)
// from being parsed at length.
constexpr size_t kMaxConfigBytes = 1 << 20;
constexpr int kMaxStages = 64;
// Each spawned replica is a process on this machine.
constexpr int64_t kMaxSpawnReplicas = 256;
// A request resumed more often than this is failing for its own reasons.
constexpr int64_t kMaxFailoverAttempts = 16;
constexpr int64_t kMaxIndexBlocksPerReplica = int64_t{1} << 24;

const std::vector<std::string> kTopKeys = {"name",
                                           "keepalive_ms",
                                           "keepalive_timeout_ms",
                                           "request_idle_timeout_ms",
                                           "reconnect_initial_backoff_ms",
                                           "reconnect_max_backoff_ms",
                                           "drain_timeout_ms",
                                           "worker_abort_timeout_ms",
                                           "limits",
                                           "scaling",
                                           "playback",
                                           "objectives",
                                           "peers",
                                           "stages"};
const std::vector<std::string> kStageKeys = {
    "name",      "engine",       "engine_params",   "replicas",   "addresses",
    "discovery", "final_output", "output_modality", "input_mode", "defaults",
    "pick",      "prefix",       "failover"};
const std::vector<std::string> kPeersKeys = {"addresses", "discovery", "timeout_ms"};
const std::vector<std::string> kDefaultsKeys = {"max_tokens", "seed", "temperature", "extra"};

absl::Status ReadDefaults(const YAML::Node& node, const std::string& path,
                          v1::StageParameters* out) {
  Fields fields(node, path, kDefaultsKeys);
  int64_t max_tokens = 0;
  fields.Int("max_tokens", 1, kMaxTokensLimit, &max_tokens);
  if (max_tokens > 0) out->set_max_tokens(static_cast<uint32_t>(max_tokens));
  if (const YAML::Node* value = fields.Find("seed")) {
    uint64_t seed = 0;
    if (!value->IsScalar() || absl::StartsWith(value->Scalar(), "-") ||
        !absl::SimpleAtoi(value->Scalar(), &seed)) {
      fields.Fail(Expected(*value, fields.PathOf("seed"), "an integer in [0, 2^64 - 1]"));
    }
    out->set_seed(seed);
  }
  if (const YAML::Node* value = fields.Find("temperature")) {
    float temperature = 0;
    if (!value->IsScalar() || !absl::SimpleAtof(value->Scalar(), &temperature) ||
        !std::isfinite(temperature) || temperature < 0 || temperature > kMaxTemperature) {
      fields.Fail(Expected(*value, fields.PathOf("temperature"),
                           absl::StrCat("a number in [0, ", kMaxTemperature, "]")));
    }
    out->set_temperature(temperature);
  }
  std::map<std::string, std::string> extra;
  fields.StringMap("extra", &extra);
  out->mutable_extra()->insert(extra.begin(), extra.end());
  return fields.status();
}

bool IsEngineName(const std::string& name) {
  return !name.empty() && name.size() <= 64 && std::all_of(name.begin(), name.end(), [](char c) {
    return absl::ascii_islower(c) || absl::ascii_isdigit(c) || c == '_';
  });
}

// For a spawned stage: the engine's name and parameters go on the worker's
// command line (--engine=name --engine_params=key=value,...). Whether the engine
// exists and takes them is the worker's to say: it refuses to start and the
// spawner names the field (local_workers.h).
absl::Status CheckSpawnedEngine(const StageConfig& stage, Fields& fields) {
  if (stage.engine.empty()) {
    return Invalid(fields.PathOf("engine"), "required when spawning replicas");
  }
  if (!IsEngineName(stage.engine)) {
    return Expected(*fields.Find("engine"), fields.PathOf("engine"),
                    "an engine name (a-z, 0-9, _)");
  }
  for (const auto& [key, value] : stage.engine_params) {
    if (absl::StrContains(value, ',')) {
      return Invalid(Child(fields.PathOf("engine_params"), key),
                     "a value cannot contain ',' (stage_worker takes key=value,... pairs)");
    }
  }
  return absl::OkStatus();
}

bool IsStageName(const std::string& name) {
  return !name.empty() && name.size() <= 64 && std::all_of(name.begin(), name.end(), [](char c) {
    return absl::ascii_islower(c) || absl::ascii_isdigit(c) || c == '_' || c == '-';
  });
}

absl::Status ReadPrefixPick(const YAML::Node& node, const std::string& path,
                            PrefixPickOptions* prefix) {
  Fields fields(node, path,
                {"block_tokens", "mode", "load_cost_tokens", "balance_threshold",
                 "index_blocks_per_replica", "index_ttl_ms"});
  int64_t block_tokens = prefix->block_tokens;
  fields.Int("block_tokens", 1, kMaxBlockTokens, &block_tokens);
  prefix->block_tokens = static_cast<int>(block_tokens);
  std::string mode;
  fields.OneOf("mode", {"auto", "approximate"}, &mode);
  if (mode == "approximate") prefix->precise = false;
  fields.Number("load_cost_tokens", 0, 1e9, &prefix->load_cost_tokens);
  fields.Number("balance_threshold", 0, 1e6, &prefix->balance_threshold);
  fields.Int("index_blocks_per_replica", 1, kMaxIndexBlocksPerReplica,
             &prefix->index_blocks_per_replica);
  fields.Millis("index_ttl_ms", 1, &prefix->index_ttl);
  return fields.status();
}

absl::Status ReadStage(const YAML::Node& node, int id, StageConfig* stage) {
  const std::string path = absl::StrCat("stages[", id, "]");
  if (node.IsNull()) return Expected(node, path, "a map");
  Fields fields(node, path, kStageKeys);
  if (!fields.status().ok()) return fields.status();
  if (fields.Has("replicas") + fields.Has("addresses") + fields.Has("discovery") != 1) {
    return Invalid(path, "give exactly one of replicas, addresses and discovery");
  }
  stage->id = id;
  stage->defaults.set_stage_id(id);
  fields.String("name", &stage->name, /*required=*/true);
  if (fields.status().ok() && !IsStageName(stage->name)) {
    fields.Fail(
        Expected(*fields.Find("name"), fields.PathOf("name"), "1 to 64 of a-z, 0-9, _ and -"));
  }
  fields.String("engine", &stage->engine);
  fields.StringMap("engine_params", &stage->engine_params);
  int64_t replicas = 0;
  fields.Int("replicas", 1, kMaxSpawnReplicas, &replicas);
  stage->spawn_replicas = static_cast<int>(replicas);
  if (const YAML::Node* addresses = fields.Find("addresses")) {
    fields.Fail(ReadAddresses(*addresses, fields.PathOf("addresses"), &stage->addresses));
  }
  if (const YAML::Node* discovery = fields.Find("discovery")) {
    fields.Fail(ReadDiscovery(*discovery, fields.PathOf("discovery"), &stage->discovery));
  }
  fields.Bool("final_output", &stage->final_output);
  std::string modality;
  fields.OneOf("output_modality", {"text", "audio", "tokens"}, &modality, /*required=*/true);
  if (fields.status().ok()) stage->output_modality = *ParseModality(modality);
  std::string input_mode;
  fields.OneOf("input_mode", {"on_finish", "streaming"}, &input_mode);
  if (input_mode == "streaming") stage->input_mode = InputMode::kStreaming;
  std::string pick;
  fields.OneOf("pick", {"round_robin", "least_loaded", "prefix_aware"}, &pick);
  if (pick == "least_loaded") stage->pick = PickPolicy::kLeastLoaded;
  if (pick == "prefix_aware") stage->pick = PickPolicy::kPrefixAware;
  if (const YAML::Node* prefix = fields.Find("prefix")) {
    if (stage->pick != PickPolicy::kPrefixAware) {
      fields.Fail(Invalid(fields.PathOf("prefix"), "only used with pick: prefix_aware"));
    } else {
      fields.Fail(ReadPrefixPick(*prefix, fields.PathOf("prefix"), &stage->prefix));
    }
  }
  if (const YAML::Node* failover = fields.Find("failover")) {
    Fields attempts(*failover, fields.PathOf("failover"), {"max_attempts"});
    int64_t max_attempts = 0;
    attempts.Int("max_attempts", 1, kMaxFailoverAttempts, &max_attempts);
    if (attempts.status().ok() && !attempts.Has("max_attempts")) {
      attempts.Fail(Invalid(attempts.PathOf("max_attempts"), "required"));
    }
    fields.Fail(attempts.status());
    stage->failover_max_attempts = static_cast<int>(max_attempts);
  }
  if (const YAML::Node* defaults = fields.Find("defaults")) {
    fields.Fail(ReadDefaults(*defaults, fields.PathOf("defaults"), &stage->defaults));
  }
  if (!fields.status().ok()) return fields.status();

  if (stage->spawn_replicas == 0) {
    // Workers at addresses (or found through DNS) were started with their own
    // engine and parameters; parameters here would be silently ignored.
    if (!stage->engine_params.empty()) {
      return Invalid(fields.PathOf("engine_params"),
                     "only used with replicas (workers at addresses or found by discovery take "
                     "their parameters on their own command line)");
    }
    return absl::OkStatus();
  }
  return CheckSpawnedEngine(*stage, fields);
}

absl::Status ReadStages(const YAML::Node& stages, PipelineConfig* config) {
  if (!stages.IsSequence()) return Expected(stages, "stages", "a list of stages");
  if (stages.size() == 0) return Invalid("stages", "expected at least one stage, got none");
  if (stages.size() > kMaxStages) {
    return Invalid("stages", absl::StrCat("at most ", kMaxStages, " stages, got ", stages.size()));
  }
  std::map<std::string, std::string> address_users;  // address -> its path
  for (size_t i = 0; i < stages.size(); ++i) {
    StageConfig stage;
    absl::Status status = ReadStage(stages[i], static_cast<int>(i), &stage);
    if (!status.ok()) return status;
    for (const StageConfig& earlier : config->stages) {
      if (earlier.name == stage.name) {
        return Invalid("stages", absl::StrCat("names must be unique ('", stage.name, "' twice)"));
      }
    }
    for (size_t j = 0; j < stage.addresses.size(); ++j) {
      const std::string path = absl::StrCat("stages[", i, "].addresses[", j, "]");
      auto [it, added] = address_users.emplace(stage.addresses[j], path);
      if (!added) {
        return Invalid(path, absl::StrCat("'", stage.addresses[j], "' is already used by ",
                                          it->second, " (one worker serves one replica)"));
      }
    }
    if (stage.discovery.has_value()) {
      const std::string path = absl::StrCat("stages[", i, "].discovery");
      auto [it, added] = address_users.emplace(
          absl::StrCat("dns:", stage.discovery->name, ":", stage.discovery->port), path);
      if (!added) {
        return Invalid(path, absl::StrCat("'", stage.discovery->name, "' port ",
                                          stage.discovery->port, " is already used by ", it->second,
                                          " (one worker serves one stage)"));
      }
    }
    config->stages.push_back(std::move(stage));
  }
  if (!config->stages.back().final_output) {
    return Invalid("stages", absl::StrCat("the last stage (", config->stages.back().name,
                                          ") must have final_output: true"));
  }
  return absl::OkStatus();
}

absl::Status ReadPeers(const YAML::Node& node, PipelineConfig* config) {
  if (!node.IsMap()) return Expected(node, "peers", "a map with addresses or discovery");
  Fields fields(node, "peers", kPeersKeys);
  if (!fields.status().ok()) return fields.status();
  if (fields.Has("addresses") + fields.Has("discovery") != 1) {
    return Invalid("peers", "give exactly one of addresses and discovery");
  }
  if (const YAML::Node* addresses = fields.Find("addresses")) {
    fields.Fail(ReadAddresses(*addresses, fields.PathOf("addresses"), &config->peers.addresses));
  }
  if (const YAML::Node* discovery = fields.Find("discovery")) {
    fields.Fail(ReadDiscovery(*discovery, fields.PathOf("discovery"), &config->peers.discovery));
  }
  fields.Millis("timeout_ms", 1, &config->peer_timeout);
  return fields.status();
}

absl::Status ReadConfig(const YAML::Node& root, PipelineConfig* config) {
  if (!root.IsMap()) return Expected(root, "", "a map with at least the key 'stages'");
  Fields top(root, "", kTopKeys);
  top.String("name", &config->name);
  top.Millis("keepalive_ms", 100, &config->keepalive_time);
  top.Millis("keepalive_timeout_ms", 100, &config->keepalive_timeout);
  top.Millis("request_idle_timeout_ms", 0, &config->request_idle_timeout);
  top.Millis("reconnect_initial_backoff_ms", 1, &config->reconnect_initial_backoff);
  top.Millis("reconnect_max_backoff_ms", 1, &config->reconnect_max_backoff);
  top.Millis("drain_timeout_ms", 0, &config->drain_timeout);
  top.Millis("worker_abort_timeout_ms", 1, &config->worker_abort_timeout);
  if (top.status().ok() && config->reconnect_max_backoff < config->reconnect_initial_backoff) {
    top.Fail(
        Invalid("reconnect_max_backoff_ms",
                absl::StrCat("must be >= reconnect_initial_backoff_ms (",
                             absl::ToInt64Milliseconds(config->reconnect_initial_backoff),
                             "), got ", absl::ToInt64Milliseconds(config->reconnect_max_backoff))));
  }
  if (const YAML::Node* node = top.Find("limits")) top.Fail(ReadLimits(*node, config));
  if (const YAML::Node* node = top.Find("scaling")) top.Fail(ReadScaling(*node, &config->scaling));
  if (const YAML::Node* node = top.Find("playback")) {
    top.Fail(ReadPlayback(*node, &config->playback));
  }
  if (const YAML::Node* node = top.Find("objectives")) {
    top.Fail(ReadObjectiveDefaults(*node, "objectives", &config->objectives));
  }
  if (const YAML::Node* node = top.Find("peers")) top.Fail(ReadPeers(*node, config));
  const YAML::Node* stages = top.Find("stages", /*required=*/true);
  if (!top.status().ok()) return top.status();
  return ReadStages(*stages, config);
}

}  // namespace

std::string StageConfig::origin() const {
  if (discovery.has_value()) return absl::StrCat("dns:", discovery->name);
  return spawn_replicas > 0 ? "spawned" : "addresses";
}

absl::StatusOr<PipelineConfig> ParsePipelineConfig(const std::string& yaml_text) {
  if (yaml_text.size() > kMaxConfigBytes) {
    return Invalid("", absl::StrCat("larger than ", kMaxConfigBytes, " bytes"));
  }
  // yaml-cpp reports errors by throwing; nothing thrown may leave this function.
  try {
    absl::Status status = CheckOneDocument(yaml_text);
    if (!status.ok()) return status;
    const YAML::Node root = YAML::Load(yaml_text);
    if (root.IsNull()) return Invalid("", "empty; expected a map with at least the key 'stages'");
    PipelineConfig config;
    status = ReadConfig(root, &config);
    if (!status.ok()) return status;
    return config;
  } catch (const YAML::DeepRecursion& e) {
    return YamlError(e.mark, absl::StrCat("nested too deeply (", e.depth(), " levels)"));
  } catch (const YAML::Exception& e) {
    return YamlError(e.mark, e.msg);
  } catch (const std::exception& e) {
    return Invalid("", absl::StrCat("unreadable YAML: ", e.what()));
  }
}

const std::vector<std::string>& PipelineConfigTopKeys() { return kTopKeys; }

absl::StatusOr<PipelineConfig> LoadPipelineConfig(const std::string& path) {
  errno = 0;
  std::unique_ptr<FILE, int (*)(FILE*)> file(std::fopen(path.c_str(), "rb"), &std::fclose);
  std::string text;
  int error = file == nullptr ? errno : 0;
  if (file != nullptr) {
    char buffer[16384];
    size_t n = 0;
    while (text.size() <= kMaxConfigBytes &&
           (n = std::fread(buffer, 1, sizeof(buffer), file.get())) > 0) {
      text.append(buffer, n);
    }
    if (std::ferror(file.get())) error = errno != 0 ? errno : EIO;
  }
  if (error != 0) {
    const std::string message = absl::StrCat(
        path, ": cannot read the pipeline config: ", std::generic_category().message(error));
    if (error == ENOENT || error == ENOTDIR) return absl::NotFoundError(message);
    if (error == EACCES) return absl::PermissionDeniedError(message);
    return absl::FailedPreconditionError(message);
  }
  absl::StatusOr<PipelineConfig> config = ParsePipelineConfig(text);
  if (!config.ok()) {
    return absl::Status(config.status().code(),
                        absl::StrCat(path, ": ", config.status().message()));
  }
  return config;
}

}  // namespace omnistage
