// stage_worker: one replica of one pipeline stage, serving the StageWorker gRPC API.
//
//   stage_worker --listen=127.0.0.1:0 --stage_id=0 --engine=thinker
//       --engine_params=batch_size=64,step_time_us=2000
//
// Prints one line "listening port=<port> address=<host:port> instance=<id>" on
// stdout once it serves (with " metrics_port=<port>" and " health_port=<port>"
// when --metrics_listen and --health_listen are set). Flags it refuses (an unknown engine, a bad
// engine parameter) are named on stderr and, for whoever spawned it, in one stdout line "refused
// field=<path> reason=<text>" (path: engine or engine_params.<key>); it then exits 2.
// SIGTERM/SIGINT: drain — NOT_SERVING, every session told, the requests it has run for up to
// --drain_timeout_ms, the rest are stopped (each ends on its session) — then stop the busy loop and
// exit 0 (a second signal ends it at once). A fatal engine error: a fatal event to every session,
// NOT_SERVING, exit 1. A step that runs past --stall_timeout_ms: NOT_SERVING and a stalled event to
// every session (SERVING again if it returns); past --stall_exit_ms: exit 3, so that a supervisor
// restarts it.
#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <cstdlib>
#include <iostream>
#include <map>
#include <string>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "common/field_error.h"
#include "common/flags_usage.h"
#include "common/grpc/service_process.h"
#include "common/grpc/tls.h"
#include "common/host_port.h"
#include "common/limits.h"
#include "common/listen_check.h"
#include "common/listening_line.h"
#include "common/log.h"
#include "common/metrics_server.h"
#include "common/tracing/trace_metrics.h"
#include "common/tracing/tracing_flags.h"
#include "stage_worker/engines/registry.h"
#include "stage_worker/worker.h"
#include "stage_worker/worker_service.h"

ABSL_FLAG(std::string, listen, "127.0.0.1:0", "host:port to listen on; port 0 picks one");
ABSL_FLAG(int, stage_id, 0, "the pipeline stage this worker serves");
ABSL_FLAG(std::string, health_listen, "",
          "host:port of a plaintext port answering only grpc.health.v1, for probes that "
          "cannot speak TLS (off when empty; port 0 picks one)");
ABSL_FLAG(std::string, tls_cert, "",
          "PEM certificate chain to serve TLS with (with --tls_key; re-read when it changes)");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls_cert");
ABSL_FLAG(std::string, tls_client_ca, "",
          "PEM CA bundle: only clients (orchestrators) whose certificate chains to it may "
          "connect (mTLS)");
ABSL_FLAG(std::string, log_format, "text",
          "log lines on stderr: text (for people) or json (one object per line, for log "
          "shippers)");
ABSL_FLAG(std::string, log_level, "info",
          "the least severe lines logged: debug, info, "
          "warning or error (debug adds a line per request)");
ABSL_FLAG(std::string, metrics_listen, "",
          "host:port for Prometheus metrics at /metrics over HTTP (off when empty; port 0 "
          "picks one)");
ABSL_FLAG(std::string, engine, "sim_llm",
          "engine name (sim_llm, listener, thinker, talker, vocoder, or python: a Python class "
          "named by --engine_params module=...,class=...)");
ABSL_FLAG(std::string, engine_params, "",
          "engine parameters as comma-separated key=value pairs, e.g. batch_size=64");
ABSL_FLAG(std::string, instance_id, "", "instance id reported to clients (default: generated)");
ABSL_FLAG(int, max_message_bytes, static_cast<int>(omnistage::kDefaultWorkerMaxMessageBytes),
          "largest message accepted from a client (announced to clients in Ready)");
ABSL_FLAG(int, max_streams_per_connection, 1000,
          "concurrent streams one client connection may open (more wait in the client)");
ABSL_FLAG(int, min_ping_interval_ms, 50,
          "a client pinging more often than this (with nothing to send) is disconnected "
          "after two such pings");
ABSL_FLAG(int, shutdown_grace_ms, 2000, "how long running calls may take to end at shutdown");
ABSL_FLAG(int, drain_timeout_ms, 30000,
          "on SIGTERM: how long the requests it has may still run before they are stopped");
ABSL_FLAG(int, stall_timeout_ms, 30000,
          "a step running longer is stalled: NOT_SERVING, its sessions told (0: never)");
ABSL_FLAG(int, stall_exit_ms, 120000,
          "a step running longer makes the worker exit with code 3 (0: never)");

namespace omnistage {
namespace {

absl::StatusOr<std::map<std::string, std::string>> ParseEngineParams(absl::string_view text) {
  std::map<std::string, std::string> params;
  for (absl::string_view pair : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    std::pair<std::string, std::string> kv = absl::StrSplit(pair, absl::MaxSplits('=', 1));
    if (kv.first.empty() || pair.find('=') == absl::string_view::npos) {
      return AtField(absl::InvalidArgumentError(
                         absl::StrCat("--engine_params: expected key=value, got '", pair, "'")),
                     "engine_params");
    }
    if (!params.emplace(kv.first, kv.second).second) {
      return AtField(
          absl::InvalidArgumentError(absl::StrCat("--engine_params: '", kv.first, "' given twice")),
          "engine_params");
    }
  }
  return params;
}

// A refused flag: a line for people on stderr, one for the spawner on stdout.
int Refuse(const absl::Status& status) {
  const std::string field = ErrorField(status);
  if (!field.empty()) {
    std::cout << "refused field=" << field << " reason=" << status.message() << std::endl;
  }
  return StartRefused("stage_worker", status.message());
}

int Run() {
  // SIGUSR1: sent by the monitor thread when the busy loop ends.
  StopSignals signals(SIGUSR1);
  if (absl::Status s = SetUpLogging("stage_worker", absl::GetFlag(FLAGS_log_format),
                                    absl::GetFlag(FLAGS_log_level));
      !s.ok()) {
    return StartRefused("stage_worker", s.message());
  }
  // A taken or unknown address stops start-up here, before the engine loads,
  // with one line that says why and what to do (not gRPC's error block).
  if (absl::Status s =
          CheckCanListenAll({{"--listen", absl::GetFlag(FLAGS_listen)},
                             {"--health_listen", absl::GetFlag(FLAGS_health_listen)},
                             {"--metrics_listen", absl::GetFlag(FLAGS_metrics_listen)}});
      !s.ok()) {
    return StartRefused("stage_worker", s.message());
  }

  absl::StatusOr<std::map<std::string, std::string>> params =
      ParseEngineParams(absl::GetFlag(FLAGS_engine_params));
  if (!params.ok()) return Refuse(params.status());
  const std::string engine_name = absl::GetFlag(FLAGS_engine);
  absl::StatusOr<std::unique_ptr<Engine>> engine = CreateEngine(engine_name, *params);
  if (!engine.ok()) return Refuse(engine.status());
  absl::StatusOr<std::unique_ptr<Tracer>> tracer = StartTracing("stage_worker");
  if (!tracer.ok()) return StartRefused("stage_worker", tracer.status().message());
  WorkerOptions options;
  options.tracer = *std::move(tracer);
  options.stage_id = absl::GetFlag(FLAGS_stage_id);
  options.engine_name = engine_name;
  options.instance_id = absl::GetFlag(FLAGS_instance_id);
  options.max_message_bytes = absl::GetFlag(FLAGS_max_message_bytes);
  options.stall.stall_after = absl::Milliseconds(absl::GetFlag(FLAGS_stall_timeout_ms));
  options.stall.exit_after = absl::Milliseconds(absl::GetFlag(FLAGS_stall_exit_ms));
  Worker worker(options, *std::move(engine));
  AddTraceMetrics(&worker.metrics_registry(), options.tracer.get());
  // The engine is stuck for good: exit so that a supervisor (the orchestrator
  // for spawned workers, Kubernetes in a cluster) starts a fresh one. The busy
  // loop cannot be joined, so nothing is torn down.
  worker.set_on_stall_exit([&worker](const absl::Status& why) {
    LogError(worker.log_context(), absl::StrCat(why.message(), "; exiting"));
    std::_Exit(3);
  });

  WorkerServerOptions server_options;
  server_options.address = absl::GetFlag(FLAGS_listen);
  server_options.max_receive_message_bytes = absl::GetFlag(FLAGS_max_message_bytes);
  server_options.max_streams_per_connection = absl::GetFlag(FLAGS_max_streams_per_connection);
  server_options.health_address = absl::GetFlag(FLAGS_health_listen);
  server_options.min_ping_interval = absl::Milliseconds(absl::GetFlag(FLAGS_min_ping_interval_ms));
  server_options.tls = {absl::GetFlag(FLAGS_tls_cert), absl::GetFlag(FLAGS_tls_key),
                        absl::GetFlag(FLAGS_tls_client_ca)};
  server_options.tls_flags = "--tls_cert/--tls_key/--tls_client_ca";
  absl::StatusOr<std::unique_ptr<WorkerServer>> server =
      WorkerServer::Start(server_options, &worker);
  if (!server.ok()) return StartRefused("stage_worker", server.status().message());
  if (server_options.tls.enabled() && server_options.tls.ca.empty()) {
    LogWarning(worker.log_context(),
               "--tls_client_ca is not set: any client that reaches this port may open "
               "sessions; set it to the CA of the orchestrators' certificates (mTLS)");
  }
  std::unique_ptr<MetricsServer> metrics;
  if (const std::string listen = absl::GetFlag(FLAGS_metrics_listen); !listen.empty()) {
    absl::StatusOr<std::unique_ptr<MetricsServer>> started =
        MetricsServer::Start(listen, &worker.metrics_registry());
    if (!started.ok()) return StartRefused("stage_worker", started.status().message());
    metrics = *std::move(started);
  }
  worker.Start();

  // The host as given; --listen parsed when CheckCanListenAll passed.
  const std::string host = ParseHostPort(server_options.address, PortRule::kListen)->host;
  const std::string address = FormatHostPort(host, (*server)->port());
  ListeningLine listening{(*server)->port(), address, {{"instance", worker.instance_id()}}};
  if (metrics != nullptr)
    listening.fields.push_back({"metrics_port", absl::StrCat(metrics->port())});
  if ((*server)->health_port() > 0) {
    listening.fields.push_back({"health_port", absl::StrCat((*server)->health_port())});
  }
  PrintListeningLine(listening);
  LogInfo(worker.log_context(),
          absl::StrCat("serving stage ", options.stage_id, " with engine ", engine_name,
                       " (capacity ", worker.engine().capacity(), ") on ", address, ", instance ",
                       worker.instance_id(),
                       metrics != nullptr ? absl::StrCat(", metrics on port ", metrics->port())
                                          : std::string("")));

  const pthread_t main_thread = pthread_self();
  absl::Status result;
  std::atomic<bool> loop_ended{false};
  std::thread monitor([&] {
    result = worker.Wait();
    loop_ended = true;
    pthread_kill(main_thread, SIGUSR1);
  });
  int signal = 0;
  do {
    signal = signals.Wait();
  } while (signal == SIGUSR1 && !loop_ended);
  if (signal != SIGUSR1) {
    LogInfo(worker.log_context(),
            absl::StrCat(StopSignals::Name(signal), ", draining (signal again to stop at once)"));
    signals.StopAtOnceOnNext();
    worker.Drain(absl::Milliseconds(absl::GetFlag(FLAGS_drain_timeout_ms)));
    worker.RequestShutdown();
  }
  monitor.join();
  metrics.reset();
  (*server)->Shutdown(absl::Milliseconds(absl::GetFlag(FLAGS_shutdown_grace_ms)));
  if (!result.ok()) {
    LogError(worker.log_context(),
             absl::StrCat("exiting after a fatal engine error: ", result.message()));
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace omnistage

int main(int argc, char** argv) {
  omnistage::SetUsage("Serves one replica of one pipeline stage over gRPC.", "stage_worker/main.cc",
                      {omnistage::kTracingFlagsFile});
  omnistage::ParseFlagsOrExit(argc, argv, "stage_worker");
  omnistage::ServiceRuntime runtime(argv[0]);  // Outlives everything Run() makes.
  return omnistage::Run();
}
