#include "orchestrator/config/pipeline_config.h"

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace omnistage {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;
using ::testing::StartsWith;

// Every key of the schema, with a value other than its default.
constexpr char kFullExample[] = R"(
name: omni-demo
keepalive_ms: 3000
keepalive_timeout_ms: 1500
request_idle_timeout_ms: 0
reconnect_initial_backoff_ms: 50
reconnect_max_backoff_ms: 8000
drain_timeout_ms: 2500
worker_abort_timeout_ms: 750
peers:
  discovery: {dns: omnistage-orchestrator-peers, port: 50052, refresh_ms: 1000}
  timeout_ms: 1500
limits:
  max_in_flight: 500
  max_prompt_bytes: 1024
  max_client_queued_bytes: 2097152
  max_in_flight_per_identity: 50
  max_streams_per_connection: 64
  min_client_ping_interval_ms: 10000
  max_connection_age_ms: 600000
  max_connection_age_grace_ms: 0
  max_replay_bytes: 65536
  max_input_chunk_bytes: 4096
  max_input_bytes: 1000000
  input_idle_ms: 5000
scaling:
  target_utilization_percent: 70
  window_ms: 60000
  sample_ms: 2000
playback:
  jitter_buffer_ms: 150
  audio_admission_percent: 90
objectives:
  first_output_ms: 2000
  first_audio_ms: 1500
  between_outputs_ms: 80
  criticality: sheddable
stages:
  - name: thinker
    engine: thinker
    engine_params: {batch_size: 64, step_time_us: 2000}
    replicas: 1
    final_output: true
    output_modality: text
    input_mode: on_finish
    defaults: {max_tokens: 64, seed: 7, temperature: 0.7, extra: {sentences: 3}}
  - name: talker
    engine: talker
    addresses: ["127.0.0.1:7001", "talker-1.omni.svc:7001", "[::1]:7002"]
    output_modality: tokens
    input_mode: streaming
    pick: least_loaded
    failover: {max_attempts: 3}
  - name: middle
    engine: sim_llm
    replicas: 2
    output_modality: tokens
    pick: prefix_aware
    prefix: {block_tokens: 32, mode: approximate, load_cost_tokens: 512.5, balance_threshold: 0.25,
             index_blocks_per_replica: 1000, index_ttl_ms: 60000}
  - name: vocoder
    engine: vocoder
    discovery: {dns: omnistage-vocoder.default.svc.cluster.local, port: 9000, refresh_ms: 250}
    final_output: true
    output_modality: audio
    input_mode: streaming
)";

// A valid one-stage pipeline in flow style; `extra` is spliced into the stage.
std::string OneStage(const std::string& extra) {
  return absl::StrCat(
      "stages: [{name: a, engine: sim_llm, replicas: 1, final_output: true, "
      "output_modality: tokens",
      extra.empty() ? "" : ", ", extra, "}]");
}

TEST(PipelineConfigTest, FullExampleParsesEveryField) {
  absl::StatusOr<PipelineConfig> config = ParsePipelineConfig(kFullExample);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->name, "omni-demo");
  EXPECT_EQ(config->keepalive_time, absl::Milliseconds(3000));
  EXPECT_EQ(config->keepalive_timeout, absl::Milliseconds(1500));
  EXPECT_EQ(config->request_idle_timeout, absl::ZeroDuration());
  EXPECT_EQ(config->reconnect_initial_backoff, absl::Milliseconds(50));
  EXPECT_EQ(config->reconnect_max_backoff, absl::Milliseconds(8000));
  EXPECT_EQ(config->drain_timeout, absl::Milliseconds(2500));
  EXPECT_EQ(config->worker_abort_timeout, absl::Milliseconds(750));
  ASSERT_TRUE(config->peers.discovery.has_value());
  EXPECT_EQ(config->peers.discovery->name, "omnistage-orchestrator-peers");
  EXPECT_EQ(config->peers.discovery->port, 50052);
  EXPECT_EQ(config->peers.discovery->refresh, absl::Seconds(1));
  EXPECT_TRUE(config->peers.enabled());
  EXPECT_EQ(config->scaling.target_utilization_percent, 70);
  EXPECT_EQ(config->scaling.window, absl::Seconds(60));
  EXPECT_EQ(config->scaling.sample_interval, absl::Seconds(2));
  EXPECT_EQ(config->playback.jitter_buffer, absl::Milliseconds(150));
  EXPECT_EQ(config->playback.audio_admission_percent, 90);
  EXPECT_EQ(config->objectives.first_output_ms, 2000u);
  EXPECT_EQ(config->objectives.first_audio_ms, 1500u);
  EXPECT_EQ(config->objectives.between_outputs_ms, 80u);
  EXPECT_EQ(config->objectives.criticality, v1::CRITICALITY_SHEDDABLE);
  EXPECT_EQ(config->peer_timeout, absl::Milliseconds(1500));
  EXPECT_EQ(config->max_in_flight, 500);
  EXPECT_EQ(config->max_prompt_bytes, 1024u);
  EXPECT_EQ(config->max_client_queued_bytes, 2097152u);
  EXPECT_EQ(config->max_in_flight_per_identity, 50);
  EXPECT_EQ(config->max_streams_per_connection, 64);
  EXPECT_EQ(config->min_client_ping_interval, absl::Seconds(10));
  EXPECT_EQ(config->max_connection_age, absl::Minutes(10));
  EXPECT_EQ(config->max_connection_age_grace, absl::ZeroDuration());
  EXPECT_EQ(config->max_replay_bytes, 65536);
  EXPECT_EQ(config->max_input_chunk_bytes, 4096);
  EXPECT_EQ(config->max_input_bytes, 1000000);
  EXPECT_EQ(config->input_idle_timeout, absl::Seconds(5));
  ASSERT_EQ(config->stages.size(), 4u);

  const StageConfig& thinker = config->stages[0];
  EXPECT_EQ(thinker.id, 0);
  EXPECT_EQ(thinker.name, "thinker");
  EXPECT_EQ(thinker.engine, "thinker");
  EXPECT_THAT(thinker.engine_params,
              ElementsAre(Pair("batch_size", "64"), Pair("step_time_us", "2000")));
  EXPECT_EQ(thinker.spawn_replicas, 1);
  EXPECT_TRUE(thinker.addresses.empty());
  EXPECT_EQ(thinker.replica_count(), 1);
  EXPECT_TRUE(thinker.final_output);
  EXPECT_EQ(thinker.output_modality, v1::MODALITY_TEXT);
  EXPECT_EQ(thinker.input_mode, InputMode::kOnFinish);
  EXPECT_EQ(thinker.defaults.stage_id(), 0);
  EXPECT_EQ(thinker.defaults.max_tokens(), 64u);
  EXPECT_EQ(thinker.defaults.seed(), 7u);
  EXPECT_FLOAT_EQ(thinker.defaults.temperature(), 0.7f);
  EXPECT_EQ(thinker.defaults.extra().at("sentences"), "3");

  const StageConfig& talker = config->stages[1];
  EXPECT_EQ(talker.id, 1);
  EXPECT_EQ(talker.spawn_replicas, 0);
  EXPECT_THAT(talker.addresses,
              ElementsAre("127.0.0.1:7001", "talker-1.omni.svc:7001", "[::1]:7002"));
  EXPECT_EQ(talker.replica_count(), 3);
  EXPECT_FALSE(talker.final_output);
  EXPECT_EQ(talker.output_modality, v1::MODALITY_TOKENS);
  EXPECT_EQ(talker.input_mode, InputMode::kStreaming);
  EXPECT_EQ(talker.pick, PickPolicy::kLeastLoaded);
  EXPECT_EQ(talker.failover_max_attempts, 3);
  EXPECT_EQ(thinker.failover_max_attempts, 0);
  EXPECT_EQ(thinker.pick, PickPolicy::kRoundRobin);
  const PrefixPickOptions defaults;
  EXPECT_EQ(thinker.prefix.block_tokens, defaults.block_tokens);
  const StageConfig& middle = config->stages[2];
  EXPECT_EQ(middle.pick, PickPolicy::kPrefixAware);
  EXPECT_EQ(middle.prefix.block_tokens, 32);
  EXPECT_FALSE(middle.prefix.precise);
  EXPECT_EQ(middle.prefix.load_cost_tokens, 512.5);
  EXPECT_EQ(middle.prefix.balance_threshold, 0.25);
  EXPECT_EQ(middle.prefix.index_blocks_per_replica, 1000);
  EXPECT_EQ(middle.prefix.index_ttl, absl::Seconds(60));
  EXPECT_TRUE(defaults.precise);
  EXPECT_EQ(talker.defaults.stage_id(), 1);
  EXPECT_FALSE(talker.defaults.has_max_tokens());

  const StageConfig& vocoder = config->stages[3];
  EXPECT_EQ(vocoder.id, 3);
  ASSERT_TRUE(vocoder.discovery.has_value());
  EXPECT_EQ(vocoder.discovery->name, "omnistage-vocoder.default.svc.cluster.local");
  EXPECT_EQ(vocoder.discovery->port, 9000);
  EXPECT_EQ(vocoder.discovery->refresh, absl::Milliseconds(250));
  EXPECT_EQ(vocoder.replica_count(), 0);
  EXPECT_EQ(thinker.origin(), "spawned");
  EXPECT_EQ(talker.origin(), "addresses");
  EXPECT_EQ(vocoder.origin(), "dns:omnistage-vocoder.default.svc.cluster.local");
  EXPECT_EQ(vocoder.output_modality, v1::MODALITY_AUDIO);
  EXPECT_EQ(vocoder.defaults.stage_id(), 3);
}

TEST(PipelineConfigTest, AppliesDefaults) {
  absl::StatusOr<PipelineConfig> config = ParsePipelineConfig(OneStage(""));
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->name, "");
  EXPECT_EQ(config->keepalive_time, absl::Milliseconds(2000));
  EXPECT_EQ(config->keepalive_timeout, absl::Milliseconds(1000));
  EXPECT_EQ(config->request_idle_timeout, absl::Milliseconds(30000));
  EXPECT_EQ(config->reconnect_initial_backoff, absl::Milliseconds(100));
  EXPECT_EQ(config->reconnect_max_backoff, absl::Milliseconds(5000));
  EXPECT_EQ(config->drain_timeout, absl::Milliseconds(10000));
  EXPECT_EQ(config->worker_abort_timeout, absl::Milliseconds(2000));
  EXPECT_EQ(config->max_in_flight, 10000);
  EXPECT_EQ(config->max_prompt_bytes, 65536u);
  EXPECT_EQ(config->max_replay_bytes, 1 << 20);
  EXPECT_EQ(config->max_input_chunk_bytes, 1 << 20);
  EXPECT_EQ(config->max_input_bytes, 16 << 20);
  EXPECT_EQ(config->input_idle_timeout, absl::Seconds(30));
  EXPECT_EQ(config->scaling.target_utilization_percent, 80);
  EXPECT_EQ(config->scaling.window, absl::Seconds(30));
  EXPECT_EQ(config->scaling.sample_interval, absl::Seconds(1));
  EXPECT_EQ(config->playback.jitter_buffer, absl::ZeroDuration());
  EXPECT_EQ(config->playback.audio_admission_percent, 0);
  EXPECT_EQ(config->objectives.first_output_ms, 0u);
  ASSERT_EQ(config->stages.size(), 1u);
  const StageConfig& stage = config->stages[0];
  EXPECT_TRUE(stage.engine_params.empty());
  EXPECT_EQ(stage.input_mode, InputMode::kOnFinish);
  EXPECT_FALSE(stage.defaults.has_max_tokens());
  EXPECT_FALSE(stage.defaults.has_seed());
  EXPECT_FALSE(stage.defaults.has_temperature());
  EXPECT_TRUE(stage.defaults.extra().empty());
}

TEST(PipelineConfigTest, AcceptsEmptySectionsAndBoundaryValues) {
  absl::StatusOr<PipelineConfig> config = ParsePipelineConfig(absl::StrCat(
      "limits:\nkeepalive_ms: 100\nreconnect_initial_backoff_ms: 7\nreconnect_max_backoff_ms: 7\n",
      OneStage("defaults: {max_tokens: 1000000, seed: 18446744073709551615}, "
               "engine_params: {step_mode: busy, fail_utilities: true}")));
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->keepalive_time, absl::Milliseconds(100));
  EXPECT_EQ(config->stages[0].defaults.max_tokens(), 1000000u);
  EXPECT_EQ(config->stages[0].defaults.seed(), UINT64_MAX);
  // Discovery's refresh defaults to 5 s; a fully qualified name is a name.
  absl::StatusOr<PipelineConfig> discovered = ParsePipelineConfig(
      absl::StrReplaceAll(OneStage("discovery: {dns: talker., port: 1}"), {{"replicas: 1, ", ""}}));
  ASSERT_TRUE(discovered.ok()) << discovered.status();
  EXPECT_EQ(discovered->stages[0].discovery->refresh, absl::Milliseconds(5000));
  // The largest prompt limit that still fits a worker's AddRequest.
  EXPECT_TRUE(ParsePipelineConfig("limits: {max_prompt_bytes: 16711680}\n" + OneStage("")).ok());
  absl::StatusOr<PipelineConfig> queued =
      ParsePipelineConfig("limits: {max_client_queued_bytes: 1048576}\n" + OneStage(""));
  ASSERT_TRUE(queued.ok()) << queued.status();
  EXPECT_EQ(queued->max_client_queued_bytes, 1048576u);
}

// The error for each kind of mistake: INVALID_ARGUMENT, starting with the path of
// the field at fault.
struct ErrorCase {
  std::string yaml;
  std::string message;  // a prefix of the expected message
};

TEST(PipelineConfigTest, NamesTheFieldAndTheReason) {
  const std::string two_stages_tail =
      "{name: b, engine: sim_llm, replicas: 1, final_output: true, output_modality: tokens";
  const std::vector<ErrorCase> cases = {
      {absl::StrCat("stages: [{name: a, engine: sim_llm, replicas: 1, output_modality: text}, ",
                    two_stages_tail, ", input_mode: stream}]"),
       "stages[1].input_mode: expected on_finish or streaming, got 'stream'"},
      {"stages: [{name: a, replicas: 1, addresses: ['h:1'], final_output: true, "
       "output_modality: text}]",
       "stages[0]: give exactly one of replicas, addresses and discovery"},
      {"stages: [{name: a, engine: x, final_output: true, output_modality: text}]",
       "stages[0]: give exactly one of replicas, addresses and discovery"},
      {"stages: [{name: a, addresses: ['h:1'], discovery: {dns: a, port: 1}, "
       "final_output: true, output_modality: text}]",
       "stages[0]: give exactly one of replicas, addresses and discovery"},
      {"stages: [{name: a, discovery: {port: 9000}, final_output: true, output_modality: text}]",
       "stages[0].discovery.dns: required"},
      {absl::StrCat("objectives: {first_audio_ms: 600001}\n", OneStage("")),
       "objectives.first_audio_ms: expected a number of milliseconds in [0, 600000], got "
       "'600001'"},
      {absl::StrCat("objectives: {criticality: urgent}\n", OneStage("")),
       "objectives.criticality: expected critical, standard or sheddable, got 'urgent'"},
      {absl::StrCat("objectives: {between_outputs_ms: -5}\n", OneStage("")),
       "objectives.between_outputs_ms: expected a number of milliseconds in [0, 600000], got "
       "'-5'"},
      {OneStage("pick: random"),
       "stages[0].pick: expected round_robin, least_loaded or prefix_aware, got 'random'"},
      {OneStage("prefix: {block_tokens: 8}"),
       "stages[0].prefix: only used with pick: prefix_aware"},
      {OneStage("pick: prefix_aware, prefix: {block_tokens: 0}"),
       "stages[0].prefix.block_tokens: expected an integer in [1, 4096], got '0'"},
      {OneStage("pick: prefix_aware, prefix: {mode: exact}"),
       "stages[0].prefix.mode: expected auto or approximate, got 'exact'"},
      {OneStage("pick: prefix_aware, prefix: {load_cost_tokens: -1}"),
       "stages[0].prefix.load_cost_tokens: expected a number in [0, 1e+09]"},
      {OneStage("pick: prefix_aware, prefix: {ttl: 5}"), "stages[0].prefix.ttl: unknown key"},
      {absl::StrCat("peers: {}\n", OneStage("")),
       "peers: give exactly one of addresses and discovery"},
      {absl::StrCat("peers: {addresses: ['h:1'], discovery: {dns: a, port: 1}}\n", OneStage("")),
       "peers: give exactly one of addresses and discovery"},
      {absl::StrCat("peers: {addresses: ['h']}\n", OneStage("")),
       "peers.addresses[0]: expected host:port"},
      {absl::StrCat("peers: {discovery: {dns: a.b, port: 1}, timeout_ms: 0}\n", OneStage("")),
       "peers.timeout_ms: expected a number of milliseconds in [1, "},
      {absl::StrCat("peers: [h:1]\n", OneStage("")),
       "peers: expected a map with addresses or discovery"},
      {"stages: [{name: a, discovery: {dns: a.b}, final_output: true, output_modality: text}]",
       "stages[0].discovery.port: required"},
      {"stages: [{name: a, discovery: {dns: a.b, port: 70000}, final_output: true, "
       "output_modality: text}]",
       "stages[0].discovery.port: expected an integer in [1, 65535], got '70000'"},
      {"stages: [{name: a, discovery: {dns: 'talker_svc..x', port: 1}, final_output: true, "
       "output_modality: text}]",
       "stages[0].discovery.dns: expected a DNS name"},
      {"stages: [{name: a, discovery: {dns: a.b, port: 1, refresh_ms: 10}, final_output: true, "
       "output_modality: text}]",
       "stages[0].discovery.refresh_ms: expected a number of milliseconds in [100, "},
      {"stages: [{name: a, discovery: {dns: a.b, port: 1, ttl: 5}, final_output: true, "
       "output_modality: text}]",
       "stages[0].discovery.ttl: unknown key"},
      {"stages: [{name: a, discovery: [a.b], final_output: true, output_modality: text}]",
       "stages[0].discovery: expected a map with dns and port"},
      {"stages: [{name: a, discovery: {dns: a.b, port: 1}, engine_params: {x: 1}, "
       "final_output: true, output_modality: text}]",
       "stages[0].engine_params: only used with replicas"},
      {OneStage("engine_params: {batch_size: [1]}"),
       "stages[0].engine_params.batch_size: expected a single value, got a list"},
      {OneStage("engine_params: {output: 'text,tokens'}"),
       "stages[0].engine_params.output: a value cannot contain ','"},
      // Which engines exist and what they take is the worker's to say
      // (local_workers_test.sh); the loader checks what goes on its command line.
      {"stages: [{name: a, engine: 'Sim LLM', replicas: 1, final_output: true, "
       "output_modality: text}]",
       "stages[0].engine: expected an engine name (a-z, 0-9, _), got 'Sim LLM'"},
      {"stages: [{name: a, replicas: 1, final_output: true, output_modality: text}]",
       "stages[0].engine: required when spawning replicas"},
      {"stages: [{name: a, addresses: ['h:1'], engine_params: {x: 1}, final_output: true, "
       "output_modality: text}]",
       "stages[0].engine_params: only used with replicas"},
      {"stages: [{name: vocoder, engine: vocoder, replicas: 1, output_modality: audio}]",
       "stages: the last stage (vocoder) must have final_output: true"},
      {absl::StrCat("stages: [{name: b, engine: sim_llm, replicas: 1, output_modality: text}, ",
                    two_stages_tail, "}]"),
       "stages: names must be unique ('b' twice)"},
      {"stages: [{name: a, discovery: {dns: a.b, port: 1}, output_modality: text}, "
       "{name: b, discovery: {dns: a.b, port: 1}, final_output: true, output_modality: text}]",
       "stages[1].discovery: 'a.b' port 1 is already used by stages[0].discovery"},
      {"limits: {max_in_flight: abc}\n" + OneStage(""),
       "limits.max_in_flight: expected an integer >= 1, got 'abc'"},
      {"limits: {max_in_flight: 0}\n" + OneStage(""),
       "limits.max_in_flight: expected an integer >= 1, got '0'"},
      {"limits: {max_prompt_bytes: 999999999999}\n" + OneStage(""),
       "limits.max_prompt_bytes: expected an integer in [1, 16711680]"},
      // 16 MiB cannot fit in the AddRequest a worker accepts (black-box finding 1).
      {"limits: {max_client_queued_bytes: 1000}\n" + OneStage(""),
       "limits.max_client_queued_bytes: expected an integer in [1048576, 1073741824], got '1000'"},
      {"limits: {max_prompt_bytes: 16777216}\n" + OneStage(""),
       "limits.max_prompt_bytes: expected an integer in [1, 16711680], got '16777216'"},
      {"worker_abort_timeout_ms: 0\n" + OneStage(""),
       "worker_abort_timeout_ms: expected a number of milliseconds in [1, "},
      {"limits: {max_inflight: 5}\n" + OneStage(""),
       "limits.max_inflight: unknown key (known: max_in_flight, max_prompt_bytes, "
       "max_client_queued_bytes, max_in_flight_per_identity, max_streams_per_connection, "
       "min_client_ping_interval_ms, max_connection_age_ms, max_connection_age_grace_ms, "
       "max_queued, max_queue_ms, admission_headroom, max_replay_bytes, max_input_chunk_bytes, "
       "max_input_bytes, input_idle_ms, batch_reserve)"},
      {"limits: {max_input_chunk_bytes: 16777216}\n" + OneStage(""),
       "limits.max_input_chunk_bytes: expected an integer in [1, 16711680], got '16777216'"},
      {"limits: {max_input_bytes: 0}\n" + OneStage(""),
       "limits.max_input_bytes: expected an integer in [1, 1073741824], got '0'"},
      {"limits: {input_idle_ms: 0}\n" + OneStage(""), "limits.input_idle_ms: expected"},
      {"scaling: {target_utilization_percent: 0}\n" + OneStage(""),
       "scaling.target_utilization_percent: expected an integer in [1, 100], got '0'"},
      {"scaling: {sample_ms: 50}\n" + OneStage(""), "scaling.sample_ms: expected"},
      {"scaling: {window_ms: 500, sample_ms: 1000}\n" + OneStage(""),
       "scaling.window_ms: must be >= sample_ms (1000), got 500"},
      {"playback: {jitter_buffer_ms: 60001}\n" + OneStage(""),
       "playback.jitter_buffer_ms: expected a number of milliseconds in [0, 60000], got '60001'"},
      {"playback: {jitter_ms: 5}\n" + OneStage(""),
       "playback.jitter_ms: unknown key (known: jitter_buffer_ms, audio_admission_percent)"},
      {"playback: {audio_admission_percent: 101}\n" + OneStage(""),
       "playback.audio_admission_percent: expected an integer in [0, 100], got '101'"},
      {"scaling: {target: 80}\n" + OneStage(""),
       "scaling.target: unknown key (known: target_utilization_percent, window_ms, sample_ms)"},
      {"limits: {max_replay_bytes: 10}\n" + OneStage(""),
       "limits.max_replay_bytes: expected an integer in [1024, 1073741824], got '10'"},
      {OneStage("failover: {max_attempts: 0}"),
       "stages[0].failover.max_attempts: expected an integer in [1, 16], got '0'"},
      {OneStage("failover: {}"), "stages[0].failover.max_attempts: required"},
      {OneStage("failover: {max_attempt: 2}"),
       "stages[0].failover.max_attempt: unknown key (known: max_attempts)"},
      {OneStage("failover: 2"), "stages[0].failover: expected a map"},
      {"limits: {max_in_flight: 10, max_in_flight_per_identity: 11}\n" + OneStage(""),
       "limits.max_in_flight_per_identity: must be <= max_in_flight (10), got 11"},
      {"limits: {min_client_ping_interval_ms: 10}\n" + OneStage(""),
       "limits.min_client_ping_interval_ms: expected a number of milliseconds in [100, "},
      {"limits: {max_streams_per_connection: 0}\n" + OneStage(""),
       "limits.max_streams_per_connection: expected an integer in [1, 1048576], got '0'"},
      {"limits: [1]\n" + OneStage(""), "limits: expected a map, got a list"},
      {OneStage("replicass: 2"), "stages[0].replicass: unknown key (known: name, engine,"},
      {"stagse: []\n" + OneStage(""), "stagse: unknown key (known: name, keepalive_ms,"},
      {OneStage("defaults: {max_token: 5}"),
       "stages[0].defaults.max_token: unknown key (known: max_tokens, seed, temperature, extra)"},
      {OneStage("name: b"), "stages[0].name: given twice"},
      {"stages: []", "stages: expected at least one stage, got none"},
      {"name: x", "stages: required"},
      {"stages: {a: 1}", "stages: expected a list of stages, got a map"},
      {"stages: [null]", "stages[0]: expected a map, got null"},
      {"stages: [5]", "stages[0]: expected a map, got '5'"},
      {"stages: [{engine: sim_llm, replicas: 1, final_output: true, output_modality: text}]",
       "stages[0].name: required"},
      {"stages: [{name: Thinker, engine: sim_llm, replicas: 1, final_output: true, "
       "output_modality: text}]",
       "stages[0].name: expected 1 to 64 of a-z, 0-9, _ and -, got 'Thinker'"},
      {"stages: [{name: a, engine: sim_llm, replicas: 1, final_output: true}]",
       "stages[0].output_modality: required"},
      {OneStage("output_modality: video"), "stages[0].output_modality: given twice"},
      {"stages: [{name: a, engine: sim_llm, replicas: 1, final_output: true, "
       "output_modality: video}]",
       "stages[0].output_modality: expected text, audio or tokens, got 'video'"},
      {"stages: [{name: a, engine: sim_llm, replicas: 1, final_output: yes please, "
       "output_modality: text}]",
       "stages[0].final_output: expected true or false, got 'yes please'"},
      {"stages: [{name: a, engine: sim_llm, replicas: 0, final_output: true, "
       "output_modality: text}]",
       "stages[0].replicas: expected an integer in [1, 256], got '0'"},
      {"stages: [{name: a, engine: sim_llm, replicas: 99999999999999999999999, "
       "final_output: true, output_modality: text}]",
       "stages[0].replicas: expected an integer in [1, 256], got '99999999999999999999999'"},
      {"stages: [{name: a, addresses: [], final_output: true, output_modality: text}]",
       "stages[0].addresses: expected a list of at least one host:port, got a list"},
      {"stages: [{name: a, addresses: h:1, final_output: true, output_modality: text}]",
       "stages[0].addresses: expected a list of at least one host:port, got 'h:1'"},
      {"stages: [{name: a, addresses: ['h:1', 'h'], final_output: true, output_modality: text}]",
       "stages[0].addresses[1]: expected host:port with a port in 1..65535"},
      {"stages: [{name: a, addresses: ['h:0'], final_output: true, output_modality: text}]",
       "stages[0].addresses[0]: expected host:port"},
      {"stages: [{name: a, addresses: ['h:65536'], final_output: true, output_modality: text}]",
       "stages[0].addresses[0]: expected host:port"},
      {"stages: [{name: a, addresses: [':80'], final_output: true, output_modality: text}]",
       "stages[0].addresses[0]: expected host:port"},
      {"stages: [{name: a, addresses: ['dns:///h:80'], final_output: true, "
       "output_modality: text}]",
       "stages[0].addresses[0]: expected host:port"},
      {"stages: [{name: a, addresses: ['::1:80'], final_output: true, output_modality: text}]",
       "stages[0].addresses[0]: expected host:port"},
      {"stages: [{name: a, addresses: [[h, 1]], final_output: true, output_modality: text}]",
       "stages[0].addresses[0]: expected text, got a list"},
      {"stages: [{name: a, addresses: ['h:1'], output_modality: text}, {name: b, addresses: "
       "['h:2', 'h:1'], final_output: true, output_modality: text}]",
       "stages[1].addresses[1]: 'h:1' is already used by stages[0].addresses[0]"},
      {OneStage("defaults: {max_tokens: 0}"),
       "stages[0].defaults.max_tokens: expected an integer in [1, 1000000], got '0'"},
      {OneStage("defaults: {max_tokens: 1000001}"),
       "stages[0].defaults.max_tokens: expected an integer in [1, 1000000], got '1000001'"},
      {OneStage("defaults: {seed: -1}"), "stages[0].defaults.seed: expected an integer"},
      {OneStage("defaults: {temperature: -0.5}"),
       "stages[0].defaults.temperature: expected a number in [0, 100], got '-0.5'"},
      {OneStage("defaults: {temperature: .nan}"), "stages[0].defaults.temperature: expected"},
      {OneStage("defaults: {extra: {k: {a: b}}}"),
       "stages[0].defaults.extra.k: expected a single value, got a map"},
      {"reconnect_initial_backoff_ms: 500\nreconnect_max_backoff_ms: 200\n" + OneStage(""),
       "reconnect_max_backoff_ms: must be >= reconnect_initial_backoff_ms (500), got 200"},
      {"keepalive_ms: 50\n" + OneStage(""),
       "keepalive_ms: expected a number of milliseconds in [100, 86400000], got '50'"},
      {"keepalive_timeout_ms: 1s\n" + OneStage(""),
       "keepalive_timeout_ms: expected a number of milliseconds in [100, 86400000], got '1s'"},
      {"request_idle_timeout_ms: -1\n" + OneStage(""), "request_idle_timeout_ms: expected"},
      {"drain_timeout_ms: 1e99\n" + OneStage(""), "drain_timeout_ms: expected"},
      {"name: [a]\n" + OneStage(""), "name: expected text, got a list"},
      {"[1, 2]", "config: expected a map with at least the key 'stages', got a list"},
      {"hello", "config: expected a map with at least the key 'stages', got 'hello'"},
      {"", "config: empty"},
      {"# nothing\n", "config: empty"},
      {OneStage("") + "\n---\n" + OneStage(""),
       "config: expected one YAML document, got another at line 2"},
      {OneStage("") + "\n...\n,\n", "YAML syntax error at line 3, column 1: unexpected ','"},
      {",\n" + OneStage(""), "YAML syntax error at line 1, column 1: unexpected ','"},
      {"stages:\n  - name: a\n    engine: [sim_llm\n", "YAML syntax error at line "},
      {"stages: [{name: a}\n", "YAML syntax error at line 2, column 1: "},
      {"stages: " + std::string(5000, '['),
       "YAML syntax error at line 1, column 1: nested too deeply"},
      {"? [1]\n: 2", "config: expected text keys, got a list"},
      // What the file says is quoted escaped and shortened, keys too (found by
      // fuzz/pipeline_config_fuzzer).
      {"\"line\\nbreak\": 1\n" + OneStage(""), "line\\nbreak: unknown key"},
      {std::string(100, 'k') + ": 1\n" + OneStage(""), std::string(64, 'k') + "...: unknown key"},
      {"stages: [{name: a, addresses: ['" + std::string(100, 'h') +
           "'], final_output: true, output_modality: text}]",
       "stages[0].addresses[0]: expected host:port with a port in 1..65535 (e.g. "
       "127.0.0.1:7001), got '" +
           std::string(64, 'h') + "...'"},
      {"a: \"\\\x01\"\n", "YAML syntax error at line 1, column 7: unknown escape character: \\x01"},
  };
  for (const ErrorCase& c : cases) {
    absl::StatusOr<PipelineConfig> config = ParsePipelineConfig(c.yaml);
    EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument) << c.yaml.substr(0, 200);
    EXPECT_THAT(std::string(config.status().message()), StartsWith(c.message))
        << c.yaml.substr(0, 200);
  }
}

// Malformed input of every shape: always INVALID_ARGUMENT, never a crash.
TEST(PipelineConfigTest, MalformedDocumentsNeverCrash) {
  std::vector<std::string> documents = {
      "   ",
      "\t",
      "stages",
      "-",
      "- a",
      "[]",
      "{}",
      "~",
      "null",
      "stages: 5",
      "stages: ~",
      "stages: [[]]",
      "stages: [[[{}]]]",
      "stages: [{name: [a]}]",
      "stages: [{name: {a: b}}]",
      "stages: [{name: a, replicas: {}}]",
      "stages: [{name: a, defaults: 5}]",
      "stages: [{name: a, defaults: {extra: [1]}}]",
      "{",
      "[",
      "}",
      "]",
      "stages: [{",
      "key: 'unterminated",
      "key: \"unterminated",
      "!!binary xx",
      "&a [*a]",
      "*unknown",
      "stages: &a [*a]",
      "a: &x 1\nb: *x\n",
      "? [a]\n: 1",
      "? {a: b}\n: c",
      "%YAML 9.9\n---\n",
      "%FOO\n--- a",
      "--- !!map",
      "!<tag:x> {}",
      "stages: !!str [1]",
      "limits: {max_in_flight: 1e400}",
      std::string("stages:\0[]", 10),
      "\xff\xfe\xfd",
      "stages: [\"\\uD800\"]",
      ":",
      "::",
      "a:b:c",
      "stages:\n\t- name: a",
      "stages:\n  - name: a\n   engine: b",
      std::string(100000, '['),
      std::string(100000, '{'),
      std::string(100000, '-'),
      std::string(2 << 20, 'a'),
  };
  std::string nested_lists = "stages: ";
  for (int i = 0; i < 5000; ++i) nested_lists += "[";
  documents.push_back(nested_lists);
  std::string nested_maps;
  for (int i = 0; i < 5000; ++i) nested_maps += "{a: ";
  documents.push_back(nested_maps);
  std::string block_nesting;
  for (int i = 0; i < 3000; ++i) block_nesting += std::string(i, ' ') + "- \n";
  documents.push_back(block_nesting);
  for (const std::string& document : documents) {
    EXPECT_EQ(ParsePipelineConfig(document).status().code(), absl::StatusCode::kInvalidArgument)
        << document.substr(0, 80);
  }
}

// Every prefix and many single-byte mutations of a valid config: each either
// parses or is INVALID_ARGUMENT (a prefix can still be a valid, shorter pipeline).
TEST(PipelineConfigTest, TruncatedAndMutatedConfigsNeverCrash) {
  const std::string valid = kFullExample;
  for (size_t n = 0; n < valid.size(); ++n) {
    absl::StatusCode code = ParsePipelineConfig(valid.substr(0, n)).status().code();
    EXPECT_TRUE(code == absl::StatusCode::kOk || code == absl::StatusCode::kInvalidArgument) << n;
  }
  const std::string noise = "{}[],:-'\"#&*!|>%@` \n\tx0";
  uint64_t state = 12345;
  for (int i = 0; i < 3000; ++i) {
    state = state * 6364136223846793005u + 1442695040888963407u;  // LCG: reproducible
    std::string mutated = valid;
    mutated[(state >> 33) % mutated.size()] = noise[(state >> 17) % noise.size()];
    absl::StatusCode code = ParsePipelineConfig(mutated).status().code();
    EXPECT_TRUE(code == absl::StatusCode::kOk || code == absl::StatusCode::kInvalidArgument)
        << mutated;
  }
}

}  // namespace
}  // namespace omnistage
