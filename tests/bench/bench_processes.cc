#include "tests/bench/bench_processes.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <ftw.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <iostream>
#include <sstream>

#include "absl/flags/parse.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/testing/free_port.h"

namespace omnistage {
namespace bench {
namespace {

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<std::string> TaskDirs(pid_t pid) {
  std::vector<std::string> dirs;
  const std::string root = absl::StrCat("/proc/", pid, "/task");
  DIR* dir = opendir(root.c_str());
  if (dir == nullptr) return dirs;
  while (dirent* entry = readdir(dir)) {
    if (entry->d_name[0] != '.') dirs.push_back(absl::StrCat(root, "/", entry->d_name));
  }
  closedir(dir);
  return dirs;
}

bool IsExecutable(const std::string& path) { return access(path.c_str(), X_OK) == 0; }

// Starts `argv` and waits up to `timeout` for its listening line.
absl::StatusOr<Server> StartListening(const std::vector<std::string>& argv,
                                      absl::Duration timeout) {
  absl::StatusOr<std::unique_ptr<ChildProcess>> process = ChildProcess::Start(argv);
  if (!process.ok()) return process.status();
  absl::StatusOr<std::string> line = (*process)->WaitForLine("listening port=", timeout);
  if (!line.ok()) return line.status();
  Server server;
  const ListeningLine listening = ListeningLineIn(*line);
  server.port = listening.port;
  server.metrics_port = listening.Number("metrics_port");
  server.process = std::move(*process);
  return server;
}

}  // namespace

std::string Absolute(const std::string& path) {
  char* resolved = realpath(path.c_str(), nullptr);
  if (resolved == nullptr) return path;
  std::string result = resolved;
  free(resolved);
  return result;
}

absl::StatusOr<ProcessCpu> ReadProcessCpu(pid_t pid) {
  absl::StatusOr<std::string> stat = ReadFile(absl::StrCat("/proc/", pid, "/stat"));
  if (!stat.ok()) return stat.status();
  // Fields after the ")" that ends the command name: state is field 3, utime 14, stime 15.
  const size_t paren = stat->rfind(')');
  if (paren == std::string::npos) return absl::InternalError("bad /proc stat");
  std::vector<std::string> fields = absl::StrSplit(stat->substr(paren + 2), ' ', absl::SkipEmpty());
  int64_t utime = 0;
  int64_t stime = 0;
  if (fields.size() < 13 || !absl::SimpleAtoi(fields[11], &utime) ||
      !absl::SimpleAtoi(fields[12], &stime)) {
    return absl::InternalError("bad /proc stat fields");
  }
  ProcessCpu cpu;
  cpu.tick_ms = (utime + stime) * 1000 / sysconf(_SC_CLK_TCK);
  for (const std::string& task : TaskDirs(pid)) {
    absl::StatusOr<std::string> schedstat = ReadFile(task + "/schedstat");
    if (!schedstat.ok()) continue;  // The thread ended meanwhile.
    int64_t ns = 0;
    int64_t runs = 0;
    std::vector<std::string> parts = absl::StrSplit(*schedstat, ' ');
    if (!parts.empty() && absl::SimpleAtoi(parts[0], &ns)) cpu.sched_ns += ns;
    if (parts.size() >= 3 && absl::SimpleAtoi(absl::StripAsciiWhitespace(parts[2]), &runs)) {
      cpu.runs += runs;
    }
  }
  return cpu;
}

absl::StatusOr<int64_t> ReadRssKib(pid_t pid) {
  absl::StatusOr<std::string> status = ReadFile(absl::StrCat("/proc/", pid, "/status"));
  if (!status.ok()) return status.status();
  for (absl::string_view line : absl::StrSplit(*status, '\n')) {
    if (!absl::ConsumePrefix(&line, "VmRSS:")) continue;
    std::vector<std::string> parts =
        absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    int64_t kib = 0;
    if (!parts.empty() && absl::SimpleAtoi(parts[0], &kib)) return kib;
  }
  return absl::InternalError("no VmRSS");
}

PeakRss::PeakRss(std::vector<pid_t> pids, absl::Duration every)
    : pids_(std::move(pids)),
      every_(every),
      peaks_(pids_.size(), 0),
      thread_([this] {
        absl::MutexLock lock(&mu_);
        do {
          for (size_t i = 0; i < pids_.size(); ++i) {
            peaks_[i] = std::max(peaks_[i], ReadRssKib(pids_[i]).value_or(0));
          }
        } while (!mu_.AwaitWithTimeout(absl::Condition(&stop_), every_));
      }) {}

PeakRss::~PeakRss() { Stop(); }

std::vector<int64_t> PeakRss::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
  absl::MutexLock lock(&mu_);
  for (size_t i = 0; i < pids_.size(); ++i) {
    peaks_[i] = std::max(peaks_[i], ReadRssKib(pids_[i]).value_or(0));
  }
  return peaks_;
}

std::vector<pid_t> ChildPids(pid_t pid) {
  std::vector<pid_t> pids;
  for (const std::string& task : TaskDirs(pid)) {
    absl::StatusOr<std::string> children = ReadFile(task + "/children");
    if (!children.ok()) continue;
    for (absl::string_view part : absl::StrSplit(*children, ' ', absl::SkipEmpty())) {
      pid_t child = 0;
      if (absl::SimpleAtoi(part, &child)) pids.push_back(child);
    }
  }
  std::sort(pids.begin(), pids.end());
  return pids;
}

absl::StatusOr<int> PickFreePort() {
  const int port = FreeLoopbackPort();
  if (port == 0) return absl::InternalError("cannot bind 127.0.0.1:0");
  return port;
}

bool CanConnect(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(port);
  const bool ok = connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0;
  close(fd);
  return ok;
}

absl::StatusOr<std::unique_ptr<TempDir>> TempDir::Create() {
  char pattern[] = "/tmp/pipeline_benchmark.XXXXXX";
  if (mkdtemp(pattern) == nullptr) return absl::InternalError("mkdtemp failed");
  return std::unique_ptr<TempDir>(new TempDir(pattern));
}

TempDir::~TempDir() {
  nftw(
      path_.c_str(), [](const char* path, const struct stat*, int, FTW*) { return remove(path); },
      16, FTW_DEPTH | FTW_PHYS);
}

int RunInScratchDir(int argc, char** argv, const std::function<int(const std::string& dir)>& run) {
  absl::ParseCommandLine(argc, argv);
  absl::StatusOr<std::unique_ptr<TempDir>> dir = TempDir::Create();
  if (!dir.ok()) {
    std::cerr << dir.status() << "\n";
    return 1;
  }
  ::setenv("TEST_TMPDIR", (*dir)->path().c_str(), 1);
  return run((*dir)->path());
}

absl::Status WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  out.close();
  if (!out) return absl::InternalError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

void StopServer(Server& server, absl::Duration grace) {
  if (server.process == nullptr) return;
  server.process->Signal(SIGTERM);
  if (!server.process->Wait(grace).has_value()) {
    std::fprintf(stderr, "pipeline_benchmark: pid %d ignored SIGTERM; SIGKILL\n",
                 static_cast<int>(server.process->pid()));
  }
  server.process.reset();  // SIGKILLs and reaps it if it is still running.
}

absl::StatusOr<Binaries> FindBinaries(const char* argv0) {
  Binaries binaries;
  binaries.self = Absolute("/proc/self/exe");
  // `bazel run` starts us in <binary>.runfiles/<workspace>; data deps live there.
  std::vector<std::string> roots = {".", absl::StrCat(argv0, ".runfiles/omnistage")};
  if (const char* workspace = getenv("BUILD_WORKSPACE_DIRECTORY")) {
    roots.push_back(absl::StrCat(workspace, "/bazel-bin"));
  }
  for (const std::string& root : roots) {
    const std::string orchestrator = root + "/orchestrator/orchestrator";
    const std::string worker = root + "/stage_worker/stage_worker";
    if (IsExecutable(orchestrator) && IsExecutable(worker)) {
      binaries.orchestrator = Absolute(orchestrator);
      binaries.stage_worker = Absolute(worker);
      return binaries;
    }
  }
  return absl::NotFoundError(
      "orchestrator/orchestrator and stage_worker/stage_worker not found in the runfiles; "
      "run with: bazel run -c opt //tests/bench:pipeline_benchmark");
}

absl::StatusOr<Server> StartBaseline(const Binaries& binaries) {
  return StartListening({binaries.self, "--serve_baseline"}, absl::Seconds(10));
}

absl::StatusOr<Server> StartRelay(const Binaries& binaries, const std::string& api,
                                  int backend_port, int threads) {
  return StartListening({binaries.self, "--serve_relay=" + api,
                         absl::StrCat("--relay_upstream=127.0.0.1:", backend_port),
                         absl::StrCat("--relay_threads=", threads)},
                        absl::Seconds(10));
}

namespace {

// Starts proxy `name` (`binary`) on a free loopback port: `configure(port)`
// writes its config into `dir` and returns its command line. Retries with
// another port when the chosen one was taken meanwhile.
absl::StatusOr<Server> StartProxy(
    const std::string& name, const std::string& binary, const std::string& dir,
    const std::function<absl::StatusOr<std::vector<std::string>>(int port)>& configure) {
  if (!IsExecutable(binary)) return absl::NotFoundError(absl::StrCat(binary, " is not installed"));
  absl::Status last = absl::UnavailableError(absl::StrCat(name, " did not start"));
  for (int attempt = 0; attempt < 3; ++attempt) {
    absl::StatusOr<int> port = PickFreePort();
    if (!port.ok()) return port.status();
    absl::StatusOr<std::vector<std::string>> argv = configure(*port);
    if (!argv.ok()) return argv.status();
    absl::StatusOr<std::unique_ptr<ChildProcess>> process = ChildProcess::Start(*argv);
    if (!process.ok()) return process.status();
    const absl::Time deadline = absl::Now() + absl::Seconds(5);
    while (absl::Now() < deadline && !(*process)->Wait(absl::ZeroDuration()).has_value()) {
      if (CanConnect(*port)) {
        Server server;
        server.port = *port;
        server.process = std::move(*process);
        return server;
      }
      absl::SleepFor(absl::Milliseconds(20));
    }
    last = absl::UnavailableError(
        absl::StrCat(name, " did not listen on port ", *port, "; see its log in ", dir));
  }
  return last;
}

}  // namespace

absl::StatusOr<Server> StartNginx(const std::string& dir, int backend_port) {
  return StartProxy("nginx", kNginxBinary, dir,
                    [&](int port) -> absl::StatusOr<std::vector<std::string>> {
    // One process, no daemon: it is ours to stop by PID. nginx proxies each
    // gRPC call on its own upstream connection, hence the connection limits.
    const std::string config = absl::StrCat(
        "daemon off;\nmaster_process off;\nworker_processes 1;\n", "error_log ", dir,
        "/nginx_error.log warn;\n", "pid ", dir, "/nginx.pid;\n", "worker_rlimit_nofile 20000;\n",
        "events { worker_connections 16000; }\n", "http {\n", "  access_log off;\n",
        "  client_body_temp_path ", dir, "/body;\n", "  proxy_temp_path ", dir, "/proxy;\n",
        "  fastcgi_temp_path ", dir, "/fastcgi;\n", "  uwsgi_temp_path ", dir, "/uwsgi;\n",
        "  scgi_temp_path ", dir, "/scgi;\n", "  http2_max_concurrent_streams 8192;\n",
        "  keepalive_requests 10000000;\n", "  keepalive_timeout 600s;\n", "  server {\n",
        "    listen 127.0.0.1:", port, " http2;\n", "    location / {\n",
        "      grpc_pass grpc://127.0.0.1:", backend_port, ";\n", "      grpc_read_timeout 600s;\n",
        "      grpc_send_timeout 600s;\n", "    }\n", "  }\n", "}\n");
    const std::string config_path = dir + "/nginx.conf";
    if (absl::Status s = WriteFile(config_path, config); !s.ok()) return s;
    return std::vector<std::string>{kNginxBinary, "-p", dir, "-c", config_path, "-e",
                                    dir + "/nginx_error.log"};
  });
}

absl::StatusOr<Server> StartHaproxy(const std::string& dir, int backend_port) {
  return StartProxy("haproxy", kHaproxyBinary, dir,
                    [&](int port) -> absl::StatusOr<std::vector<std::string>> {
    // HTTP/2 on both sides (gRPC end to end), one thread like nginx's one
    // worker, in the foreground (-db) so it is ours to stop by PID. Unlike
    // nginx it multiplexes the calls over its server connections. Streams per
    // client connection as nginx's (HAProxy's default, 100, would queue the
    // load generator's streams on its one connection).
    const std::string config = absl::StrCat(
        "global\n  nbthread 1\n  maxconn 8000\n  tune.h2.max-concurrent-streams 8192\n",
        "defaults\n  mode http\n",
        "  timeout connect 5s\n  timeout client 600s\n  timeout server 600s\n",
        "frontend grpc\n  bind 127.0.0.1:", port, " proto h2\n  default_backend baseline\n",
        "backend baseline\n  server baseline 127.0.0.1:", backend_port, " proto h2\n");
    const std::string config_path = dir + "/haproxy.cfg";
    if (absl::Status s = WriteFile(config_path, config); !s.ok()) return s;
    return std::vector<std::string>{kHaproxyBinary, "-db", "-f", config_path};
  });
}

std::string PipelineYaml(const PipelineShape& shape) {
  std::string yaml = absl::StrCat(
      "# Generated by //tests/bench:pipeline_benchmark\n", "name: bench-", shape.stages, "-stage\n",
      "keepalive_ms: ", shape.keepalive_ms, "\n",
      "keepalive_timeout_ms: ", shape.keepalive_timeout_ms, "\n", "drain_timeout_ms: 0\n",
      "limits:\n  max_in_flight: ", shape.max_in_flight, "\n", "stages:\n");
  for (int s = 0; s < shape.stages; ++s) {
    const bool last = s == shape.stages - 1;
    absl::StrAppend(&yaml, "  - name: sim", s, "\n", "    engine: sim_llm\n",
                    "    engine_params: {batch_size: ", shape.batch_size,
                    ", step_time_us: ", shape.step_time_us,
                    last && shape.stamp_outputs ? ", stamp_outputs: true" : "", "}\n", "    replicas: ", shape.replicas,
                    "\n", "    final_output: ", last ? "true" : "false", "\n",
                    "    output_modality: tokens\n");
    if (s > 0) absl::StrAppend(&yaml, "    input_mode: on_finish\n");
  }
  return yaml;
}

absl::StatusOr<Server> StartOrchestrator(const Binaries& binaries, const std::string& dir,
                                         const PipelineShape& shape) {
  const std::string config_path = absl::StrCat(dir, "/pipeline_", shape.stages, "x", shape.replicas,
                                               "_", shape.step_time_us, "us.yaml");
  if (absl::Status s = WriteFile(config_path, PipelineYaml(shape)); !s.ok()) return s;
  std::vector<std::string> argv = {binaries.orchestrator, "--config=" + config_path,
                                   "--listen=127.0.0.1:0", "--stage_worker=" + binaries.stage_worker};
  argv.insert(argv.end(), shape.orchestrator_flags.begin(), shape.orchestrator_flags.end());
  return StartListening(argv, absl::Seconds(30));
}

}  // namespace bench
}  // namespace omnistage
