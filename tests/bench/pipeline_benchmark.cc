// pipeline_benchmark: what the orchestrator costs a client, measured against a
// minimal gRPC server and nginx in the same run with the same load generator.
// Prints tables (and each target met or missed) and writes JSON.
//
//   bazel run -c opt //tests/bench:pipeline_benchmark -- --json=/tmp/bench.json
//   bazel run -c opt //tests/bench:pipeline_benchmark -- --scenarios=throughput
//       --rows=baseline,orch1 --streams=64 --step_times_us=0     (one line)
//   bazel run -c opt //tests/bench:pipeline_benchmark -- --scenarios=requests
//
// Everything listens on 127.0.0.1. The processes it starts (the baseline server,
// nginx, orchestrators and their workers, the OpenAI gateway) are stopped by PID, and die with it
// if it dies. The whole run is bounded by --max_seconds. See docs/benchmarks.md.
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "tests/bench/baseline_server.h"
#include "tests/bench/bench_processes.h"
#include "tests/bench/gateway_load.h"
#include "tests/bench/relay_server.h"
#include "tests/bench/report.h"
#include "tests/bench/request_scenarios.h"
#include "tests/bench/scenarios.h"

ABSL_FLAG(bool, serve_baseline, false, "internal: run the baseline server and nothing else");
ABSL_FLAG(std::string, serve_relay, "",
          "internal: run a relay of gRPC's callback or async API (relay_server.h) and nothing else");
ABSL_FLAG(std::string, relay_upstream, "", "internal: where --serve_relay relays to (host:port)");
ABSL_FLAG(int, relay_threads, 1, "internal: the async relay's polling threads");
ABSL_FLAG(std::string, scenarios, "throughput,light,abort,kill,idle,requests",
          "which scenarios to run: throughput, light, abort, kill, idle (includes memory), "
          "requests");
ABSL_FLAG(std::string, rows, "baseline,nginx,haproxy,orch1,orch3", "throughput rows");
ABSL_FLAG(std::string, streams, "1,16,64,256,1024,4096", "concurrent streams per throughput cell");
ABSL_FLAG(std::string, step_times_us, "0,10000",
          "simulated engine step times (the baseline is paced the same)");
ABSL_FLAG(int, tokens, 200, "tokens per request (the final stage's max_tokens)");
ABSL_FLAG(double, cell_seconds, 2, "each throughput cell runs requests back to back this long");
ABSL_FLAG(double, light_seconds, 10, "length of each light-load row");
ABSL_FLAG(int, aborts, 200, "aborts measured (each at 64 in flight)");
ABSL_FLAG(int, kill_rounds, 3, "kill -9 rounds");
ABSL_FLAG(double, idle_seconds, 10, "idle CPU window");
ABSL_FLAG(int, memory_requests, 1000, "in-flight requests for the memory figure");
ABSL_FLAG(bool, stamp_throughput, false,
          "one-way latency in the throughput cells too (production stamps; they cost the "
          "orchestrator rows throughput, so light load alone has them by default)");
ABSL_FLAG(std::string, request_rows, "baseline,orch1,orch3,gateway",
          "rows of the requests scenario: baseline, orch1, orch3, gateway (with text-grpc, the "
          "same orchestrator straight over gRPC), text-grpc; orch1 traced: trace-0.01, trace-1 "
          "(spans to a collector in this process, new traces sampled at that ratio), trace-down "
          "(every span to a collector that is down)");
ABSL_FLAG(std::string, request_outputs, "1,16",
          "outputs per request (max_tokens) of the requests scenario, one cell each");
ABSL_FLAG(int, request_streams, 64, "concurrent clients of each requests cell");
ABSL_FLAG(double, request_seconds, 3,
          "each client of a requests cell sends requests back to back this long");
ABSL_FLAG(std::string, json, "", "write the figures as JSON to this path");
ABSL_FLAG(double, max_seconds, 900, "the whole run is cut (exit 3) after this long");

namespace omnistage {
namespace bench {
namespace {

std::vector<std::string> List(const std::string& text) {
  return absl::StrSplit(text, ',', absl::SkipEmpty());
}

template <typename T>
bool Numbers(const std::string& flag, const std::string& text, std::vector<T>* out) {
  for (const std::string& part : List(text)) {
    int64_t n = 0;
    if (!absl::SimpleAtoi(part, &n) || n < 0) {
      std::cerr << "pipeline_benchmark: --" << flag << ": not a number: '" << part << "'\n";
      return false;
    }
    out->push_back(static_cast<T>(n));
  }
  return true;
}

// Exits the process if the run outlives its bound; the children die with it.
class Watchdog {
 public:
  explicit Watchdog(absl::Duration limit)
      : thread_([this, limit] {
          std::unique_lock<std::mutex> lock(mu_);
          if (!done_cv_.wait_for(lock, absl::ToChronoSeconds(limit), [this] { return done_; })) {
            std::fprintf(stderr, "pipeline_benchmark: still running after %s; giving up\n",
                         absl::FormatDuration(limit).c_str());
            std::_Exit(3);
          }
        }) {}
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    done_cv_.notify_all();
    thread_.join();
  }

 private:
  std::mutex mu_;
  std::condition_variable done_cv_;
  bool done_ = false;
  std::thread thread_;  // Last: starts after everything above exists.
};

// The first three fields of /proc/loadavg.
std::string LoadAverage() {
  std::ifstream in("/proc/loadavg");
  std::string one, five, fifteen;
  in >> one >> five >> fifteen;
  return absl::StrCat(one, " ", five, " ", fifteen);
}

std::string UtcNow() {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::Now(), absl::UTCTimeZone());
}

// The proxy `started`, or (when it could not start) no server and a note of why
// its rows are skipped, naming the Debian `package` that provides it.
Server StartProxyOrNote(const std::string& name, const std::string& package,
                        absl::StatusOr<Server> started, std::string* note) {
  if (started.ok()) return std::move(*started);
  *note = absl::StrCat(name, " rows skipped: ", started.status().message(),
                       " (Debian: apt-get install -y ", package, ")");
  std::cerr << "pipeline_benchmark: " << *note << "\n";
  return Server();
}

int Run(int argc, char** argv) {
  // Every stream through nginx is an upstream connection of its own.
  rlimit files;
  if (getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < files.rlim_max) {
    files.rlim_cur = files.rlim_max;
    setrlimit(RLIMIT_NOFILE, &files);
  }
  BenchOptions options;
  options.rows = List(absl::GetFlag(FLAGS_rows));
  options.streams.clear();
  options.step_times_us.clear();
  options.request_outputs.clear();
  if (!Numbers("streams", absl::GetFlag(FLAGS_streams), &options.streams) ||
      !Numbers("step_times_us", absl::GetFlag(FLAGS_step_times_us), &options.step_times_us) ||
      !Numbers("request_outputs", absl::GetFlag(FLAGS_request_outputs), &options.request_outputs)) {
    return 2;
  }
  options.request_rows = List(absl::GetFlag(FLAGS_request_rows));
  options.request_streams = absl::GetFlag(FLAGS_request_streams);
  options.request_time = absl::Seconds(absl::GetFlag(FLAGS_request_seconds));
  if (options.request_streams < 1) {
    std::cerr << "pipeline_benchmark: --request_streams: at least 1\n";
    return 2;
  }
  options.tokens = absl::GetFlag(FLAGS_tokens);
  options.cell_time = absl::Seconds(absl::GetFlag(FLAGS_cell_seconds));
  options.light_time = absl::Seconds(absl::GetFlag(FLAGS_light_seconds));
  options.idle_time = absl::Seconds(absl::GetFlag(FLAGS_idle_seconds));
  options.memory_requests = absl::GetFlag(FLAGS_memory_requests);
  options.stamp_throughput = absl::GetFlag(FLAGS_stamp_throughput);
  options.aborts = absl::GetFlag(FLAGS_aborts);
  options.kill_rounds = absl::GetFlag(FLAGS_kill_rounds);
  const std::vector<std::string> scenarios = List(absl::GetFlag(FLAGS_scenarios));
  auto wants = [&scenarios](const std::string& name) {
    return std::find(scenarios.begin(), scenarios.end(), name) != scenarios.end();
  };
  for (const std::string& s : scenarios) {
    if (s != "throughput" && s != "light" && s != "abort" && s != "kill" && s != "idle" &&
        s != "requests") {
      std::cerr << "pipeline_benchmark: --scenarios: unknown scenario '" << s << "'\n";
      return 2;
    }
  }

  Watchdog watchdog(absl::Seconds(absl::GetFlag(FLAGS_max_seconds)));
  Report report;
  report.command = absl::StrJoin(std::vector<std::string>(argv, argv + argc), " ");
  report.date = UtcNow();
  report.cpus = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  report.loadavg_start = LoadAverage();
  report.options = options;

  BenchEnv env;
  absl::StatusOr<Binaries> binaries = FindBinaries(argv[0]);
  if (!binaries.ok()) {
    std::cerr << "pipeline_benchmark: " << binaries.status().message() << "\n";
    return 2;
  }
  env.binaries = *binaries;
  absl::StatusOr<std::unique_ptr<TempDir>> dir = TempDir::Create();
  if (!dir.ok()) {
    std::cerr << "pipeline_benchmark: " << dir.status().message() << "\n";
    return 2;
  }
  env.dir = (*dir)->path();
  absl::StatusOr<Server> baseline = StartBaseline(env.binaries);
  if (!baseline.ok()) {
    std::cerr << "pipeline_benchmark: baseline server: " << baseline.status().message() << "\n";
    return 2;
  }
  env.baseline = std::move(*baseline);
  env.nginx = StartProxyOrNote("nginx", "nginx-light", StartNginx(env.dir, env.baseline.port),
                               &env.nginx_note);
  report.nginx_note = env.nginx_note;
  env.haproxy = StartProxyOrNote("haproxy", "haproxy",
                                 StartHaproxy(env.dir, env.baseline.port), &env.haproxy_note);
  report.haproxy_note = env.haproxy_note;
  struct RelayRow {
    const char* row;
    const char* api;
    int threads;
  };
  for (const RelayRow& r : {RelayRow{"relay-cb", "callback", 1}, RelayRow{"relay-async", "async", 1},
                            RelayRow{"relay-async2", "async", 2}}) {
    absl::StatusOr<Server> relay = StartRelay(env.binaries, r.api, env.baseline.port, r.threads);
    if (!relay.ok()) {
      std::cerr << "pipeline_benchmark: " << r.row << ": " << relay.status().message() << "\n";
      return 2;
    }
    env.relays[r.row] = std::move(*relay);
  }

  if (wants("throughput")) report.throughput = RunThroughput(options, env);
  if (wants("requests")) {
    report.requests = RunRequests(options, env, FindGateway(argv[0], env.binaries));
  }
  if (wants("light")) report.light = RunLightLoad(options, env);
  if (wants("abort")) {
    report.aborts.push_back(RunAbort(options, env, options.abort_streams));
    report.aborts.push_back(RunAbort(options, env, 1));
  }
  if (wants("kill")) report.kill = RunKill(options, env);
  if (wants("idle")) report.idle = RunIdleAndMemory(options, env);
  for (auto& [row, relay] : env.relays) StopServer(relay);
  StopServer(env.haproxy);
  StopServer(env.nginx);
  StopServer(env.baseline);
  report.loadavg_end = LoadAverage();

  std::cout << FormatReport(report) << std::flush;
  const std::string json_path = absl::GetFlag(FLAGS_json);
  if (!json_path.empty()) {
    if (absl::Status s = WriteFile(json_path, JsonReport(report)); !s.ok()) {
      std::cerr << "pipeline_benchmark: " << s.message() << "\n";
      return 1;
    }
    std::cout << "JSON written to " << json_path << "\n";
  }
  return 0;
}

}  // namespace
}  // namespace bench
}  // namespace omnistage

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Measures the orchestrator against a minimal gRPC server and nginx; see "
      "docs/benchmarks.md.");
  std::vector<char*> args = absl::ParseCommandLine(argc, argv);
  if (absl::GetFlag(FLAGS_serve_baseline)) return omnistage::bench::RunBaselineServer();
  const std::string relay = absl::GetFlag(FLAGS_serve_relay);
  if (relay == "callback") {
    return omnistage::bench::RunCallbackRelay(absl::GetFlag(FLAGS_relay_upstream));
  }
  if (relay == "async") {
    return omnistage::bench::RunAsyncRelay(absl::GetFlag(FLAGS_relay_upstream),
                                           absl::GetFlag(FLAGS_relay_threads));
  }
  if (!relay.empty()) {
    std::cerr << "pipeline_benchmark: --serve_relay: callback or async, not '" << relay << "'\n";
    return 2;
  }
  return omnistage::bench::Run(argc, argv);
}
