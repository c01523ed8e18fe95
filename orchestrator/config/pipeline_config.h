// The pipeline config: which stages the orchestrator serves, how it reaches their
// replicas, and its timeouts and admission limits, read from one YAML file
// (documented key by key in docs/pipeline_config.md).
//
//   absl::StatusOr<PipelineConfig> config =
//       LoadPipelineConfig("pipelines/local_omni.yaml");
//   if (!config.ok()) return config.status();  // names the file, field and reason
//   for (const StageConfig& stage : config->stages) SpawnOrConnect(stage);
//
// Loading validates everything the orchestrator itself can check: unknown keys,
// types, ranges, addresses, names. What an engine accepts (its name, parameters
// and the stage defaults) is checked by the worker that runs it: a spawned worker
// refuses to start, any worker refuses a session whose defaults its engine would
// refuse, and either way the error names the config field. Bad config is rejected
// at start with the field path and the reason, e.g.
//   stages[1].input_mode: expected on_finish or streaming, got 'stream'
//
// Thread-safe (no state). Never throws, also not on malformed YAML.
#ifndef OMNISTAGE_ORCHESTRATOR_CONFIG_PIPELINE_CONFIG_H_
#define OMNISTAGE_ORCHESTRATOR_CONFIG_PIPELINE_CONFIG_H_

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "orchestrator/config/objective_defaults.h"
#include "orchestrator/config/pick_policy.h"
#include "protos/common.pb.h"

namespace omnistage {

// How a stage takes the previous stage's output.
enum class InputMode {
  // All of it, once the previous stage finished the request.
  kOnFinish,
  // Chunk by chunk as the previous stage produces it (cuts time-to-first-audio).
  kStreaming,
};

// A stage whose replicas are the A/AAAA records of a DNS name (a Kubernetes
// headless Service): looked up every `refresh`, each address one replica.
struct DnsDiscovery {
  std::string name;
  int port = 0;
  absl::Duration refresh = absl::Milliseconds(5000);
};

struct StageConfig {
  // Position in the pipeline, 0-based; stage i's output feeds stage i + 1.
  int id = 0;
  // Unique within the pipeline, [a-z0-9_-]+.
  std::string name;
  // Engine name; always set when spawning, may be empty for `addresses` and
  // `discovery`.
  std::string engine;
  // Passed to the engine as given (values as strings); only when spawning.
  std::map<std::string, std::string> engine_params;
  // Exactly one of the next three says where the replicas are.
  // > 0: spawn this many local stage_worker processes.
  int spawn_replicas = 0;
  // host:port of existing workers, one per replica.
  std::vector<std::string> addresses;
  // Replicas that come and go, found through DNS.
  std::optional<DnsDiscovery> discovery;
  // Whether this stage's output streams to clients.
  bool final_output = false;
  v1::Modality output_modality = v1::MODALITY_UNSPECIFIED;
  // Ignored for stage 0, which takes the prompt.
  InputMode input_mode = InputMode::kOnFinish;
  // How a request not yet bound here picks its replica.
  PickPolicy pick = PickPolicy::kRoundRobin;
  // With PickPolicy::kPrefixAware: its knobs (`prefix:`).
  PrefixPickOptions prefix;
  // `failover: {max_attempts: N}` (docs/reliability.md): a request whose
  // replica here goes away is resumed on another live replica of this stage,
  // at most N times; 0 (the default): it fails, naming the replica.
  int failover_max_attempts = 0;
  // Per-request parameters used where a request leaves a field unset;
  // defaults.stage_id() == id.
  v1::StageParameters defaults;

  // The number of replicas, spawned or addressed (0 with discovery: it varies).
  int replica_count() const {
    return spawn_replicas > 0 ? spawn_replicas : static_cast<int>(addresses.size());
  }
  // Where a replica came from, for status: "spawned", "addresses" or
  // "dns:<name>".
  std::string origin() const;
};

// The other orchestrators sharing these workers (several replicas of one
// orchestrator Deployment): where their peer ports are, listed or found through
// DNS. The list may name this orchestrator too; it recognises itself.
struct PeersConfig {
  std::vector<std::string> addresses;
  std::optional<DnsDiscovery> discovery;
  bool enabled() const { return !addresses.empty() || discovery.has_value(); }
};

// Each stage's autoscaling signal (`scaling:`; docs/observability.md,
// "Autoscaling signals"): the share of its slots a replica should keep busy,
// how far back the measured demand reaches (an exponentially weighted
// average's time constant), and how often it is sampled.
struct ScalingConfig {
  int target_utilization_percent = 80;
  absl::Duration window = absl::Seconds(30);
  absl::Duration sample_interval = absl::Seconds(1);
};

// The listener the audio figures are measured against (docs/observability.md,
// "How a listener hears it"): it starts playing this long after the first
// audio arrives.
struct PlaybackConfig {
  absl::Duration jitter_buffer = absl::ZeroDuration();
  // Admission by audio capacity (docs/architecture.md, "The admission
  // queue"): once the pipeline's audio capacity is measured, requests that
  // want audio wait in the admission queue while this share of it (percent)
  // is in flight; 0: off.
  int audio_admission_percent = 0;
};

// The initializers are the documented defaults of the keys left out of a file.
struct PipelineConfig {
  // Free text, for logs and status.
  std::string name;
  // At least one; the last has final_output.
  std::vector<StageConfig> stages;
  // Not enabled: this orchestrator is alone.
  PeersConfig peers;
  // A forwarded Abort or a peer's status that has not answered by then fails
  // (for the ids that peer may hold); a client's shorter deadline wins.
  absl::Duration peer_timeout = absl::Milliseconds(5000);
  // HTTP/2 keepalive ping interval on each orchestrator->worker channel.
  absl::Duration keepalive_time = absl::Milliseconds(2000);
  // A replica not answering a ping within this is dead.
  absl::Duration keepalive_timeout = absl::Milliseconds(1000);
  // A request producing nothing for this long fails; ZeroDuration() = never.
  absl::Duration request_idle_timeout = absl::Milliseconds(30000);
  // Reconnect backoff to a dead replica, exponential from initial to max.
  absl::Duration reconnect_initial_backoff = absl::Milliseconds(100);
  absl::Duration reconnect_max_backoff = absl::Milliseconds(5000);
  // On SIGTERM, how long in-flight requests may still run before being aborted.
  absl::Duration drain_timeout = absl::Milliseconds(10000);
  // A worker Abort call that has not answered by then fails (the request is not
  // committed and can be aborted again); a client's shorter deadline wins.
  absl::Duration worker_abort_timeout = absl::Milliseconds(2000);
  // Generate calls beyond this many in flight get RESOURCE_EXHAUSTED.
  int max_in_flight = 10000;
  // Longer prompts get INVALID_ARGUMENT. At most 16 MiB - 64 KiB, so a prompt
  // always fits the AddRequest a worker accepts.
  size_t max_prompt_bytes = 65536;
  // Streamed input (GenerateDuplex, docs/clients.md): the largest chunk one
  // message may carry (at most 16 MiB - 64 KiB, so it always fits the
  // AppendInput a worker accepts), the most a request may stream in all, and
  // the longest pause between two of its messages while its input is open.
  // Past any of them the request ends with an error, stopped on every stage.
  int64_t max_input_chunk_bytes = 1 << 20;
  int64_t max_input_bytes = 16 << 20;
  absl::Duration input_idle_timeout = absl::Milliseconds(30000);
  // Responses queued for one client that reads slower than the pipeline
  // writes; past it the request is stopped on every stage ("client too slow").
  size_t max_client_queued_bytes = 16 << 20;
  // Generate calls of one identity (token or certificate; all unauthenticated
  // clients together are one) beyond this many in flight get
  // RESOURCE_EXHAUSTED; 0: only max_in_flight applies.
  int max_in_flight_per_identity = 0;
  // The admission queue (docs/architecture.md, "The admission queue"): a new
  // request goes to stage 0 only while it has a free slot — its live replicas'
  // reported capacity plus `admission_headroom` requests each, against their
  // reported load and what was sent since — and otherwise waits here, ordered
  // by priority, then fair share between identities, then arrival. At most
  // `max_queued` wait (0: no queue, every request is sent at once) and each at
  // most `max_queue_wait`; both are refused with RESOURCE_EXHAUSTED.
  int max_queued = 1000;
  absl::Duration max_queue_wait = absl::Milliseconds(30000);
  int admission_headroom = 2;
  // The share of each stage-0 replica's capacity that work that can wait
  // (GenerateRequest.batch) leaves free: such a request starts only while
  // the replica holds fewer than capacity x (1 - batch_reserve) requests,
  // so an interactive arrival finds a slot, and batch work is the first to
  // wait as interactive load rises.
  double batch_reserve = 0.25;
  // Failover (docs/reliability.md): per request, the most bytes of stage
  // input (and, for engines that resume by continuation, of stage output) the
  // orchestrator keeps to resume it on another replica. Past it the request
  // no longer fails over; it fails as without failover, and says so.
  int64_t max_replay_bytes = 1 << 20;
  // The client connections: concurrent streams one connection may open (more
  // wait in the client), the shortest interval between a client's keepalive
  // pings (closer pings count as strikes; past two the connection is closed),
  // and the age after which a connection is asked to go (GOAWAY), so that
  // long-lived clients spread over new orchestrators behind a load balancer;
  // calls still running then have the grace to finish. Zero age: never.
  int max_streams_per_connection = 4096;
  absl::Duration min_client_ping_interval = absl::Seconds(5);
  absl::Duration max_connection_age = absl::Minutes(30);
  absl::Duration max_connection_age_grace = absl::Minutes(10);
  ScalingConfig scaling;
  PlaybackConfig playback;
  // The latency objectives of a request that sets none and whose identity
  // has none (`objectives:`; docs/architecture.md, "Latency objectives").
  ObjectiveDefaults objectives;
};

// Parses and validates a config. INVALID_ARGUMENT naming the field by path
// ("stages[0].engine_params.batch_size: ...") or, for YAML syntax errors, the
// line and column.
absl::StatusOr<PipelineConfig> ParsePipelineConfig(const std::string& yaml_text);

// Reads and parses the file at `path`; every error message starts with "<path>: ".
// NOT_FOUND when the file does not exist, PERMISSION_DENIED when it cannot be
// read for lack of permission, FAILED_PRECONDITION for other read failures (e.g.
// a directory), else as ParsePipelineConfig().
absl::StatusOr<PipelineConfig> LoadPipelineConfig(const std::string& path);

// The keys a config may have at its top (docs/pipeline_config.md): the
// first part of every error's field path.
const std::vector<std::string>& PipelineConfigTopKeys();

}  // namespace omnistage

#endif  // OMNISTAGE_ORCHESTRATOR_CONFIG_PIPELINE_CONFIG_H_
