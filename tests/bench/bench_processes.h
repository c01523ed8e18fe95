// The processes a benchmark run starts and watches: the baseline server, nginx and
// HAProxy in
// front of it, orchestrators with generated pipeline configs (which spawn their
// own stage workers), and what /proc says about them (CPU time, RSS, children).
//
// Every process is a ChildProcess: stopped by PID (SIGTERM, then SIGKILL) when
// its owner goes away, and killed by the kernel if the benchmark dies
// (PR_SET_PDEATHSIG); the orchestrator's workers die with the orchestrator.
#ifndef OMNISTAGE_TESTS_BENCH_BENCH_PROCESSES_H_
#define OMNISTAGE_TESTS_BENCH_BENCH_PROCESSES_H_

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/testing/child_process.h"

namespace omnistage {
namespace bench {

// CPU time of a whole process so far.
struct ProcessCpu {
  int64_t sched_ns = 0;  // Sum of /proc/<pid>/task/*/schedstat run time (ns resolution).
  int64_t tick_ms = 0;   // utime + stime from /proc/<pid>/stat (clock-tick resolution).
  // Times a thread of it was put on a CPU (schedstat's third field, summed over
  // the threads alive when read): its wake-ups, near enough.
  int64_t runs = 0;
};
absl::StatusOr<ProcessCpu> ReadProcessCpu(pid_t pid);
// VmRSS from /proc/<pid>/status, in KiB.
absl::StatusOr<int64_t> ReadRssKib(pid_t pid);
// The highest VmRSS of each of `pids`, sampled every `every` from construction
// until Stop() (one sampling thread, joined there or in the destructor).
class PeakRss {
 public:
  PeakRss(std::vector<pid_t> pids, absl::Duration every);
  ~PeakRss();
  // Stops sampling; the peaks in KiB, in the order of the pids given.
  std::vector<int64_t> Stop();

 private:
  const std::vector<pid_t> pids_;
  const absl::Duration every_;
  absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<int64_t> peaks_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;  // Last: starts after everything above exists.
};
// The direct children of `pid` (from /proc/<pid>/task/*/children), ascending.
std::vector<pid_t> ChildPids(pid_t pid);
// `path` with symlinks resolved (realpath), or as given if it does not resolve.
std::string Absolute(const std::string& path);
// A TCP port on 127.0.0.1 that was free a moment ago.
absl::StatusOr<int> PickFreePort();
// Whether 127.0.0.1:port accepts connections.
bool CanConnect(int port);

// A directory under /tmp, removed with its files when this goes away.
class TempDir {
 public:
  static absl::StatusOr<std::unique_ptr<TempDir>> Create();
  ~TempDir();
  const std::string& path() const { return path_; }

 private:
  explicit TempDir(std::string path) : path_(std::move(path)) {}
  const std::string path_;
};

// A benchmark's main: parses its flags, makes a scratch TempDir (also
// TEST_TMPDIR, for the harnesses that start processes), and returns `run`'s
// exit code (1 when the directory could not be made).
int RunInScratchDir(int argc, char** argv, const std::function<int(const std::string& dir)>& run);

// Writes `text` to `path`.
absl::Status WriteFile(const std::string& path, const std::string& text);

// A started server process and the port it serves on.
struct Server {
  std::unique_ptr<ChildProcess> process;
  int port = 0;
  int metrics_port = 0;  // From its listening line; 0 without --metrics_listen.
  pid_t pid() const { return process->pid(); }
};

// SIGTERM, then SIGKILL after `grace`; reaps it. Safe on a null or ended process.
void StopServer(Server& server, absl::Duration grace = absl::Seconds(5));

// Paths of the binaries this run uses: the orchestrator and stage worker from
// the runfiles (data deps) or, failing that, the workspace's bazel-bin; the
// baseline is this program itself.
struct Binaries {
  std::string orchestrator;
  std::string stage_worker;
  std::string self;
};
absl::StatusOr<Binaries> FindBinaries(const char* argv0);

// The baseline server (this binary with --serve_baseline).
absl::StatusOr<Server> StartBaseline(const Binaries& binaries);

// A relay of gRPC's callback ("callback") or asynchronous ("async", with
// `threads` polling threads) API in front of 127.0.0.1:backend_port (this binary
// with --serve_relay; relay_server.h).
absl::StatusOr<Server> StartRelay(const Binaries& binaries, const std::string& api,
                                  int backend_port, int threads = 1);

// nginx (Debian's /usr/sbin/nginx) proxying gRPC on a free loopback port to
// 127.0.0.1:backend_port, with its config, logs and temp files in `dir`.
// NOT_FOUND if nginx is not installed.
inline constexpr char kNginxBinary[] = "/usr/sbin/nginx";
absl::StatusOr<Server> StartNginx(const std::string& dir, int backend_port);

// HAProxy (Debian's /usr/sbin/haproxy) proxying gRPC over HTTP/2 on a free
// loopback port to 127.0.0.1:backend_port: the other hop users put in front.
// NOT_FOUND if haproxy is not installed.
inline constexpr char kHaproxyBinary[] = "/usr/sbin/haproxy";
absl::StatusOr<Server> StartHaproxy(const std::string& dir, int backend_port);

// A pipeline of `stages` sim_llm stages in a line (the last one final), each
// with `replicas` spawned workers.
struct PipelineShape {
  int stages = 1;
  int replicas = 1;
  int64_t step_time_us = 0;
  int batch_size = 4096;
  // Under full load on a small machine a keepalive answer can take longer than
  // the default second; a benchmark must not evict a busy replica.
  int keepalive_ms = 2000;
  int keepalive_timeout_ms = 10000;
  int max_in_flight = 10000;
  // The last stage stamps its outputs (one-way latency; load_generator.h).
  bool stamp_outputs = false;
  // More orchestrator flags (the workers it spawns get its tracing flags).
  std::vector<std::string> orchestrator_flags;
};
std::string PipelineYaml(const PipelineShape& shape);

// Writes the config for `shape` to `dir` and starts an orchestrator on port 0.
absl::StatusOr<Server> StartOrchestrator(const Binaries& binaries, const std::string& dir,
                                         const PipelineShape& shape);

}  // namespace bench
}  // namespace omnistage

#endif  // OMNISTAGE_TESTS_BENCH_BENCH_PROCESSES_H_
