// orchestrator: the omnistage API server. Loads a pipeline config, spawns the
// stage workers it asks for on loopback (or connects to the given addresses, or
// to the replicas a DNS name lists), and serves omnistage.v1.Orchestrator with
// health and reflection.
//
//   orchestrator --config=pipelines/local_omni.yaml --listen=127.0.0.1:50051
//
// Prints one line "listening port=<port> address=<host:port>" once it serves
// (with " metrics_port=<port>" when --metrics_listen is set, " health_port=<port>"
// when --health_listen is, " peer_port=<port>" when --peer_listen is), ending
// with " node=<node id>".
// SIGTERM/SIGINT: stop admitting, let in-flight requests finish (drain_timeout),
// abort the rest, stop the workers it spawned, exit 0.
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/field_error.h"
#include "common/flags_usage.h"
#include "common/grpc/service_process.h"
#include "common/grpc/tls.h"
#include "common/host_port.h"
#include "common/listen_check.h"
#include "common/listening_line.h"
#include "common/log.h"
#include "common/tracing/tracing_flags.h"
#include "orchestrator/config/pipeline_config.h"
#include "orchestrator/orchestrator.h"

ABSL_FLAG(std::string, config, "", "pipeline config file (YAML); see docs/pipeline_config.md");
ABSL_FLAG(std::string, listen, "127.0.0.1:50051", "host:port for clients; port 0 picks one");
ABSL_FLAG(std::string, tls_cert, "",
          "PEM certificate chain to serve clients TLS with (with --tls_key; re-read when it "
          "changes)");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls_cert");
ABSL_FLAG(std::string, tls_client_ca, "",
          "PEM CA bundle: clients must present a certificate chaining to it (mTLS)");
ABSL_FLAG(std::string, health_listen, "",
          "host:port of a plaintext port answering only grpc.health.v1, for probes that "
          "cannot speak TLS (off when empty; port 0 picks one)");
ABSL_FLAG(std::string, tokens_file, "",
          "YAML file of bearer tokens clients must send, each with an identity and a role "
          "(user or admin); re-read when it changes. See docs/security.md");
ABSL_FLAG(std::string, peer_listen, "",
          "host:port of the peer port, where the other orchestrators sharing the workers "
          "forward aborts and ask for status (the config's peers: list it); off when empty, "
          "required with peers:");
ABSL_FLAG(std::string, peer_tls_cert, "",
          "PEM certificate for the peer port and for calls to peers (mutual TLS; with "
          "--peer_tls_key and --peer_tls_ca)");
ABSL_FLAG(std::string, peer_tls_key, "", "PEM private key of --peer_tls_cert");
ABSL_FLAG(std::string, peer_tls_ca, "",
          "PEM CA bundle: only peers with a certificate chaining to it may call the peer "
          "port, and peers called must prove themselves with one");
ABSL_FLAG(std::string, worker_tls_ca, "",
          "PEM CA bundle the workers' certificates must chain to: talk TLS to the workers, "
          "checking each one's certificate against the name dialled");
ABSL_FLAG(std::string, worker_tls_cert, "",
          "PEM client certificate presented to the workers (mTLS; with --worker_tls_key). "
          "Spawned workers serve with it too, requiring it from their clients");
ABSL_FLAG(std::string, worker_tls_key, "", "PEM private key of --worker_tls_cert");
ABSL_FLAG(std::string, log_format, "text",
          "log lines on stderr: text (for people) or json (one object per line, for log "
          "shippers)");
ABSL_FLAG(std::string, log_level, "info", "the least severe lines logged: debug, info, "
          "warning or error (debug adds a line per request and stage)");
ABSL_FLAG(bool, access_log, true,
          "an info line per finished request: who, the stages and replicas it ran on, what it "
          "delivered, how long it took, how it ended (--access_log=false: none)");
ABSL_FLAG(std::string, metrics_listen, "",
          "host:port for Prometheus metrics at /metrics over HTTP (off when empty; port 0 "
          "picks one)");
ABSL_FLAG(std::string, dns_server, "",
          "host:port of the DNS server for stages with discovery: (default: the system's, "
          "from /etc/resolv.conf)");
ABSL_FLAG(std::string, stage_worker, "",
          "stage_worker binary for spawned stages (default: next to this binary)");

namespace omnistage {
namespace {

// "<config>: <field>: <message>" for errors about the config's content.
int ConfigError(const std::string& path, const absl::Status& status) {
  return StartRefused("orchestrator",
                      absl::StrCat(path, ": ", ErrorField(status), ": ", status.message()));
}

// "thinker (thinker, spawned x1), talker (talker, dns:omnistage-talker:50061), ...".
std::string StagesSummary(const PipelineConfig& config) {
  std::vector<std::string> stages;
  for (const StageConfig& stage : config.stages) {
    std::string where = stage.origin();
    if (stage.spawn_replicas > 0) absl::StrAppend(&where, " x", stage.spawn_replicas);
    if (!stage.addresses.empty()) absl::StrAppend(&where, " ", absl::StrJoin(stage.addresses, ","));
    if (stage.discovery.has_value()) absl::StrAppend(&where, ":", stage.discovery->port);
    stages.push_back(absl::StrCat(stage.name, " (", stage.engine, ", ", where, ")"));
  }
  return absl::StrJoin(stages, " -> ");
}

// "; peers dns:omnistage-orchestrator-peers:50052, peer port 50052" or "".
std::string PeersSummary(const PipelineConfig& config, int peer_port) {
  const PeersConfig& peers = config.peers;
  if (!peers.enabled()) return "";
  return absl::StrCat("; peers ",
                      peers.discovery.has_value()
                          ? absl::StrCat("dns:", peers.discovery->name, ":", peers.discovery->port)
                          : absl::StrJoin(peers.addresses, ","),
                      ", peer port ", peer_port);
}

int Run() {
  StopSignals signals;
  if (absl::Status s = SetUpLogging("orchestrator", absl::GetFlag(FLAGS_log_format),
                                    absl::GetFlag(FLAGS_log_level));
      !s.ok()) {
    return StartRefused("orchestrator", s.message());
  }
  const std::string path = absl::GetFlag(FLAGS_config);
  if (path.empty()) return StartRefused("orchestrator", "--config is required");
  absl::StatusOr<PipelineConfig> config = LoadPipelineConfig(path);
  if (!config.ok()) return StartRefused("orchestrator", config.status().message());
  // A taken or unknown address stops start-up here, before any worker is
  // spawned, with one line.
  if (absl::Status s = CheckCanListenAll({{"--listen", absl::GetFlag(FLAGS_listen)},
                                          {"--metrics_listen", absl::GetFlag(FLAGS_metrics_listen)},
                                          {"--health_listen", absl::GetFlag(FLAGS_health_listen)},
                                          {"--peer_listen", absl::GetFlag(FLAGS_peer_listen)}});
      !s.ok()) {
    return StartRefused("orchestrator", s.message());
  }
  absl::StatusOr<std::unique_ptr<Tracer>> tracer = StartTracing("orchestrator");
  if (!tracer.ok()) return StartRefused("orchestrator", tracer.status().message());
  OrchestratorOptions options;
  options.tracer = *std::move(tracer);
  options.config = *config;
  options.worker_binary = absl::GetFlag(FLAGS_stage_worker);
  options.worker_args = {absl::StrCat("--log_format=", absl::GetFlag(FLAGS_log_format)),
                         absl::StrCat("--log_level=", absl::GetFlag(FLAGS_log_level))};
  // Spawned workers trace as this orchestrator does (they inherit its
  // environment; its tracing flags go with them).
  for (std::string& arg : TracingFlagArgs()) options.worker_args.push_back(std::move(arg));
  options.listen = absl::GetFlag(FLAGS_listen);
  options.dns_server = absl::GetFlag(FLAGS_dns_server);
  options.metrics_listen = absl::GetFlag(FLAGS_metrics_listen);
  options.access_log = absl::GetFlag(FLAGS_access_log);
  options.tls = TlsFiles{absl::GetFlag(FLAGS_tls_cert), absl::GetFlag(FLAGS_tls_key),
                         absl::GetFlag(FLAGS_tls_client_ca)};
  options.worker_tls = TlsFiles{absl::GetFlag(FLAGS_worker_tls_cert),
                                absl::GetFlag(FLAGS_worker_tls_key),
                                absl::GetFlag(FLAGS_worker_tls_ca)};
  options.tokens_file = absl::GetFlag(FLAGS_tokens_file);
  options.health_listen = absl::GetFlag(FLAGS_health_listen);
  options.peer_listen = absl::GetFlag(FLAGS_peer_listen);
  options.peer_tls = TlsFiles{absl::GetFlag(FLAGS_peer_tls_cert), absl::GetFlag(FLAGS_peer_tls_key),
                              absl::GetFlag(FLAGS_peer_tls_ca)};
  absl::StatusOr<std::unique_ptr<Orchestrator>> orchestrator = Orchestrator::Start(options);
  if (!orchestrator.ok()) {
    if (!ErrorField(orchestrator.status()).empty()) return ConfigError(path, orchestrator.status());
    return StartRefused("orchestrator", orchestrator.status().message());
  }
  // --listen parsed when CheckCanListenAll passed.
  const std::string address = FormatHostPort(
      ParseHostPort(options.listen, PortRule::kListen)->host, (*orchestrator)->port());
  ListeningLine listening{(*orchestrator)->port(), address, {}};
  for (const auto& [key, port] : {std::pair<const char*, int>{"metrics_port",
                                                              (*orchestrator)->metrics_port()},
                                  {"health_port", (*orchestrator)->health_port()},
                                  {"peer_port", (*orchestrator)->peer_port()}}) {
    if (port > 0) listening.fields.push_back({key, absl::StrCat(port)});
  }
  listening.fields.push_back({"node", (*orchestrator)->node_id()});
  PrintListeningLine(listening);
  LogInfo(absl::StrCat("serving pipeline '", config->name, "' from ", path, " on ", address,
                       (*orchestrator)->metrics_port() > 0
                           ? absl::StrCat(", metrics on port ", (*orchestrator)->metrics_port())
                           : std::string(""),
                       ": ", StagesSummary(*config), "; node ", (*orchestrator)->node_id(),
                       PeersSummary(*config, (*orchestrator)->peer_port())));

  const int signal = signals.Wait();
  LogInfo(absl::StrCat(StopSignals::Name(signal), ", draining (signal again to stop at once)"));
  // A second signal ends the process (and the spawned workers with it).
  signals.StopAtOnceOnNext();
  (*orchestrator)->Drain();
  return 0;  // `orchestrator` stops every part as it goes.
}

}  // namespace
}  // namespace omnistage

int main(int argc, char** argv) {
  omnistage::SetUsage("Serves an omnistage pipeline over gRPC.", "orchestrator/main.cc",
                      {omnistage::kTracingFlagsFile});
  omnistage::ParseFlagsOrExit(argc, argv, "orchestrator");
  omnistage::ServiceRuntime runtime(argv[0]);  // Outlives everything Run() makes.
  return omnistage::Run();
}
