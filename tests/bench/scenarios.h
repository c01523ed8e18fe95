// The scenarios of //tests/bench:pipeline_benchmark and the figures each one
// produces. Every scenario drives its target with the one load generator
// (load_generator.h), starts the processes it needs, and stops them by PID
// before it returns, also on failure.
//
//   throughput  rows x step times x stream counts: tokens/s, TTFT, gaps, ratios
//   light       one stream paced at 1 ms per token: added latency per token
//   abort       Abort RPC -> terminal ABORT, 64 requests in flight
//   kill        kill -9 of one of two replicas -> terminal error of its requests
//   idle        CPU of an idle orchestrator and worker; orchestrator RSS per
//               1,000 in-flight requests, next to a bare gRPC server per
//               1,000 open streams
//   requests    many clients sending short requests back to back at zero step
//               time: requests/s and CPU per request (request_scenarios.h)
#ifndef OMNISTAGE_TESTS_BENCH_SCENARIOS_H_
#define OMNISTAGE_TESTS_BENCH_SCENARIOS_H_

#include <cstdint>
#include <memory>
#include <map>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "tests/bench/bench_processes.h"
#include "tests/bench/load_generator.h"

namespace omnistage {
namespace bench {

struct BenchOptions {
  std::vector<std::string> rows = {"baseline", "nginx", "orch1", "orch3"};
  std::vector<int> streams = {1, 16, 64, 256, 1024, 4096};
  // Step times of the simulated engine; the baseline rows are paced the same.
  std::vector<int64_t> step_times_us = {0, 10000};
  int tokens = 200;
  // Each slot of a throughput cell runs requests back to back for this long
  // (every slot completes at least one request).
  absl::Duration cell_time = absl::Seconds(2);
  absl::Duration light_time = absl::Seconds(10);
  int64_t light_pace_us = 1000;
  // Production stamps (one-way latency) in the throughput cells too. They cost
  // the orchestrator rows about a fifth of their throughput at saturation (a
  // second payload per output halves coalescing), so they are off there by
  // default; the light-load rows always carry them.
  bool stamp_throughput = false;
  // Aborts are measured with abort_streams in flight, and again with 1 (the
  // floor without load). Each victim is replaced, so every abort meets the same
  // number in flight.
  int abort_streams = 64;
  int aborts = 200;
  int kill_streams = 64;
  int kill_rounds = 3;
  absl::Duration idle_time = absl::Seconds(10);
  int memory_requests = 1000;
  // The requests scenario: rows, outputs per request (one cell each), clients,
  // and how long each client sends requests back to back in a cell.
  std::vector<std::string> request_rows = {"baseline", "orch1", "orch3", "gateway"};
  std::vector<int> request_outputs = {1, 16};
  int request_streams = 64;
  absl::Duration request_time = absl::Seconds(3);
};

// What the run shares: binaries, a temp dir, the baseline server and nginx.
struct BenchEnv {
  Binaries binaries;
  std::string dir;
  Server baseline;
  Server nginx;            // process == nullptr when nginx is unavailable.
  std::string nginx_note;  // Why nginx rows are skipped, if they are.
  Server haproxy;            // process == nullptr when haproxy is unavailable.
  std::string haproxy_note;  // Why haproxy rows are skipped, if they are.
  // The relays of gRPC's two APIs in front of the baseline (relay_server.h), by
  // row: relay-cb (callback API), relay-async and relay-async2 (asynchronous
  // API, one and two polling threads).
  std::map<std::string, Server> relays;
  // Where the traced rows' spans go (an OTLP/gRPC collector the requests
  // scenario runs); empty: no traced row.
  std::string otlp_endpoint;
};

// Figures of one load run.
struct Figures {
  int64_t requests = 0;
  int64_t failed = 0;
  int64_t tokens = 0;
  int64_t messages = 0;
  double seconds = 0;
  double tokens_per_s = 0;
  double ttft_p50_us = 0;
  double ttft_p99_us = 0;
  double gap_p50_us = 0;
  double gap_p99_us = 0;
  double gap_mean_us = 0;
  // Producer emit -> client receive (production stamps); 0 when none came.
  double one_way_p50_us = 0;
  double one_way_p99_us = 0;
  std::string error;  // Why the run failed or was cut short; empty if it did not.
};
Figures Summarize(const LoadResult& result);

struct ThroughputCell {
  std::string row;  // baseline, nginx, orch1, orch3
  int64_t step_time_us = 0;
  int streams = 0;
  Figures figures;
  double ratio_to_baseline = 0;  // 0: no baseline figure.
  double ratio_to_nginx = 0;     // 0: no nginx figure.
  // CPU time per token delivered (schedstat), of the load generator and of the
  // serving side (baseline; nginx + baseline; orchestrator + its workers).
  double client_cpu_us_per_token = 0;
  double server_cpu_us_per_token = 0;
  // The front process alone (the baseline, nginx, or the orchestrator without
  // its workers), per token delivered; and the rest of the serving side (the
  // baseline behind a proxy, or the workers; 0 for the baseline row).
  double front_cpu_us_per_token = 0;
  double back_cpu_us_per_token = 0;
  // Times a thread was put on a CPU (its wake-ups, near enough; schedstat), per
  // token delivered: the front process's, and the rest of the serving side's.
  double front_runs_per_token = 0;
  double back_runs_per_token = 0;
  // The highest VmRSS during the cell (sampled every 50 ms) of the front
  // process, and of the rest of the serving side together.
  int64_t front_peak_rss_kib = 0;
  int64_t back_peak_rss_kib = 0;
};
std::vector<ThroughputCell> RunThroughput(const BenchOptions& options, BenchEnv& env);

struct LightRow {
  std::string row;
  Figures figures;
  // The front process's CPU time and runs on a CPU (wake-ups) per token.
  double front_cpu_us_per_token = 0;
  double front_runs_per_token = 0;
};
struct LightLoad {
  int64_t pace_us = 0;
  std::vector<LightRow> rows;
};
LightLoad RunLightLoad(const BenchOptions& options, BenchEnv& env);

// Latency samples in microseconds and their summary.
struct Latencies {
  std::vector<double> us;
  double p50() const { return Percentile(us, 50); }
  double p99() const { return Percentile(us, 99); }
  double max() const { return Percentile(us, 100); }
};

struct AbortFigures {
  int in_flight = 0;   // At each abort.
  int aborted = 0;     // Terminal ABORT received.
  Latencies rpc;       // Abort RPC send -> its response.
  Latencies terminal;  // Abort RPC send -> terminal ABORT on the stream.
  // After each abort, two one-output calls in turn to the bare server (the
  // baseline) on the same loaded machine, each call start -> its output: what
  // one gRPC round trip costs here, and two in a row. An abort needs two
  // (client-orchestrator, orchestrator-worker) and the end of a worker step.
  Latencies round_trip;
  Latencies two_round_trips;
  std::string error;
};
// `in_flight` requests stream while each abort is measured (options.aborts of them).
AbortFigures RunAbort(const BenchOptions& options, BenchEnv& env, int in_flight);

struct KillRound {
  std::vector<int> bound_before;  // Bound requests per replica before the kill.
  int killed_replica = -1;        // From the terminal errors.
  int failed = 0;                 // Streams that ended with terminal ERROR.
  int unaffected_running = 0;     // Streams still running after the failures.
};
struct KillFigures {
  int in_flight = 0;
  std::vector<KillRound> rounds;
  Latencies terminal;  // kill -9 -> terminal ERROR, over every round.
  std::string error;
};
KillFigures RunKill(const BenchOptions& options, BenchEnv& env);

struct ProcessIdle {
  std::string process;
  double sched_ms_per_10s = 0;  // From schedstat (ns resolution).
  double tick_ms_per_10s = 0;   // From utime+stime (10 ms ticks).
};
struct IdleFigures {
  double seconds = 0;
  std::vector<ProcessIdle> processes;
  int64_t rss_idle_kib = 0;
  int64_t rss_loaded_kib = 0;
  int in_flight = 0;
  double kib_per_1000_requests = 0;
  int64_t worker_rss_idle_kib = 0;
  int64_t worker_rss_loaded_kib = 0;
  // The same for a fresh baseline server (bare gRPC callback API) holding as
  // many open streams: what a Generate stream costs without the orchestrator.
  int64_t baseline_rss_idle_kib = 0;
  int64_t baseline_rss_loaded_kib = 0;
  double baseline_kib_per_1000_streams = 0;
  std::string error;
};
IdleFigures RunIdleAndMemory(const BenchOptions& options, BenchEnv& env);

// One cell of the requests scenario: `streams` clients sending requests of
// `outputs` outputs back to back, at zero step time.
struct RequestCell {
  // baseline, orch1, orch3; text-grpc (a one-stage thinker orchestrator, gRPC
  // straight to it) and gateway (the OpenAI gateway in front of that one).
  std::string row;
  int outputs = 0;
  int streams = 0;
  int64_t requests = 0;
  int64_t failed = 0;
  int64_t tokens = 0;
  double seconds = 0;  // First request start -> last request end.
  double requests_per_s = 0;
  double ratio_to_baseline = 0;   // Requests/s over the baseline's; 0: no baseline figure.
  double ratio_to_text_grpc = 0;  // The gateway row's over text-grpc's; 0 otherwise.
  // Per request (schedstat): CPU time in us and runs on a CPU (wake-ups) of the
  // front process (the baseline, the orchestrator, or the gateway), of the rest
  // of the serving side (the workers; for the gateway the orchestrator and its
  // worker; 0 for the baseline), and the client's CPU (this process).
  double front_cpu_us_per_request = 0;
  double back_cpu_us_per_request = 0;
  double front_runs_per_request = 0;
  double back_runs_per_request = 0;
  double client_cpu_us_per_request = 0;
  // Request start -> its first output, as the client saw it.
  double ttft_p50_us = 0;
  double ttft_p99_us = 0;
  // The traced rows: spans the orchestrator exported and dropped per request
  // (its omnistage_trace_spans_total); -1 for the rest.
  double spans_exported_per_request = -1;
  double spans_dropped_per_request = -1;
  std::string error;  // Why the row did not run, or what went wrong in it.
};

// ---- Shared by the scenario files -------------------------------------------------

// A request through an orchestrator with `stages` stages: upstream stages make
// 8 tokens, the last one `tokens`.
v1::GenerateRequest OrchestratorRequest(const std::string& request_id, int stages, uint32_t tokens,
                                        int64_t seq);
// Waits until GetPipelineStatus shows every replica of every stage alive (the
// orchestrator serves before its workers' sessions are up).
bool WaitPipelineAlive(v1::Orchestrator::Stub* stub, absl::Duration timeout);
// Long enough never to finish during a scenario.
inline constexpr uint32_t kLongTokens = 1000000;

// An orchestrator with a connected stub; stopped by PID when this goes away.
struct Pipeline {
  Server server;
  std::shared_ptr<v1::Orchestrator::Stub> stub;
  ~Pipeline() { StopServer(server); }
};
// Starts an orchestrator of `shape` and waits until its replicas are alive.
absl::StatusOr<std::unique_ptr<Pipeline>> OpenPipeline(BenchEnv& env, const PipelineShape& shape);
// Starts `streams` requests of kLongTokens through `pipeline`, with ids
// "<prefix><seq>".
std::unique_ptr<StreamGroup> StartLong(const Pipeline& pipeline, int streams,
                                       const std::string& prefix);

// Runs one load to its end (or cuts it after `limit`) and summarizes it.
Figures RunLoad(const std::shared_ptr<v1::Orchestrator::Stub>& stub, int streams,
                absl::Duration run_for, const RequestFactory& make_request, absl::Duration limit);

}  // namespace bench
}  // namespace omnistage

#endif  // OMNISTAGE_TESTS_BENCH_SCENARIOS_H_
