// PipelineSpec: the pipeline a multi-process test runs (its stages, the
// workers' engines and flags, the orchestrator's timing), and the pipeline
// config file the orchestrator gets for it.
#ifndef OMNISTAGE_TESTS_PIPELINE_SPEC_H_
#define OMNISTAGE_TESTS_PIPELINE_SPEC_H_

#include <string>
#include <vector>

#include "common/grpc/tls.h"

namespace omnistage {

// One stage of the pipeline under test.
struct StageSpec {
  std::string name;
  std::string engine = "sim_llm";
  // The workers' --engine_params ("k=v,k=v"); the workers are ours, so these are
  // flags, not config keys.
  std::string engine_params;
  int replicas = 1;
  bool final_output = false;
  std::string output_modality = "tokens";  // text, audio or tokens
  std::string input_mode = "on_finish";    // on_finish or streaming
  // The stage's `defaults` as a YAML flow map, e.g. "{max_tokens: 64}"; empty: none.
  std::string defaults;
  // More flags for this stage's workers, e.g. "--max_message_bytes=1048576".
  std::vector<std::string> worker_flags;
  // The loopback address replica r listens on (hosts[r]); 127.0.0.1 for replicas
  // beyond the list. One address per replica lets a test cut one off.
  std::vector<std::string> hosts;
  // More flags for replica r alone (replica_flags[r]), after the stage's: a
  // later --engine_params replaces the stage's.
  std::vector<std::vector<std::string>> replica_flags;
  // Set: the stage's replicas come from DNS (`discovery:` with this name, the
  // port every replica of the stage listens on, and refresh_ms), not from
  // `addresses:`; the test keeps the name's records (PipelineSpec::dns_server).
  std::string dns_name;
  int refresh_ms = 200;
  // The stage's `pick:` (round_robin, least_loaded or prefix_aware); empty:
  // the default. With prefix_aware, its `prefix:` as a YAML flow map, e.g.
  // "{block_tokens: 4, mode: approximate}"; empty: none.
  std::string pick;
  std::string prefix;
  // > 0: the stage's `failover: {max_attempts: N}` (docs/reliability.md); 0: no
  // `failover:` key, so a dead replica fails its requests.
  int failover_max_attempts = 0;
};

// The pipeline and the orchestrator's timing. The defaults make a dead replica
// noticed and a restarted one re-admitted within about a second.
struct PipelineSpec {
  std::string name = "harness";
  std::vector<StageSpec> stages;
  int keepalive_ms = 500;
  int keepalive_timeout_ms = 500;
  int reconnect_initial_backoff_ms = 50;
  int reconnect_max_backoff_ms = 500;
  int request_idle_timeout_ms = 30000;
  int drain_timeout_ms = 10000;
  // 0: the config's default.
  int worker_abort_timeout_ms = 0;
  int max_prompt_bytes = 0;
  // 0: the config's default.
  int max_client_queued_bytes = 0;
  // More `limits:` entries as "key: value", e.g. "max_streams_per_connection: 2"
  // or "max_replay_bytes: 65536".
  std::vector<std::string> limits;
  // The config's `peers:` as a YAML flow map, e.g. "{addresses: [...]}"; empty:
  // none (OrchestratorCluster sets it).
  std::string peers;
  // The config's `scaling:` as a YAML flow map, e.g. "{window_ms: 3000}";
  // empty: none.
  std::string scaling;
  // host:port of the DNS server for stages with a dns_name (--dns_server).
  std::string dns_server;
  // More flags for the orchestrator, e.g. "--metrics_listen=127.0.0.1:0".
  std::vector<std::string> orchestrator_flags;
  // How the harness's own client reaches the orchestrator: TLS files (empty:
  // plaintext) and a bearer token (empty: none).
  TlsFiles client_tls;
  std::string token;
};

// The YAML text of `spec` with `addresses[s]` as stage s's replicas (for a
// stage with a dns_name, only the port of addresses[s][0] is used).
std::string PipelineConfigYaml(const PipelineSpec& spec,
                               const std::vector<std::vector<std::string>>& addresses);

}  // namespace omnistage

#endif  // OMNISTAGE_TESTS_PIPELINE_SPEC_H_
