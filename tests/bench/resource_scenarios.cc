// Idle CPU and memory: what an idle orchestrator and worker cost, and what an
// in-flight request costs the orchestrator next to an open stream on a bare gRPC
// callback server (a fresh baseline server, measured the same way).
#include <cstdio>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "tests/bench/baseline_server.h"
#include "tests/bench/scenarios.h"

namespace omnistage {
namespace bench {
namespace {

// Opens options.memory_requests slow, endless streams on a baseline server of
// its own (the shared one has grown its heap in earlier scenarios) and records
// its RSS before and once every stream has a token.
absl::Status MeasureBareGrpcMemory(const BenchOptions& options, BenchEnv& env,
                                   IdleFigures* figures) {
  absl::StatusOr<Server> server = StartBaseline(env.binaries);
  if (!server.ok()) return server.status();
  struct Stop {
    Server& server;
    ~Stop() { StopServer(server); }
  } stop{*server};
  std::shared_ptr<grpc::Channel> channel = ConnectLoopback(server->port, absl::Seconds(10));
  if (channel == nullptr) return absl::UnavailableError("cannot connect to the baseline server");
  auto stub = std::make_shared<v1::Orchestrator::Stub>(channel);
  // The same pace as the orchestrator's figure: one token per 50 ms.
  const RequestFactory slow = [](int, int64_t) {
    return BaselineRequest("", kLongTokens, 50000);
  };
  const Figures warm =
      RunLoad(stub, 1, absl::ZeroDuration(),
              [](int, int64_t) { return BaselineRequest("", 4, 50000); }, absl::Seconds(30));
  if (warm.failed != 0 || warm.requests == 0) {
    return absl::UnavailableError(absl::StrCat("warm-up failed: ", warm.error));
  }
  absl::SleepFor(absl::Seconds(1));
  figures->baseline_rss_idle_kib = ReadRssKib(server->pid()).value_or(0);
  LoadOptions load;
  load.streams = options.memory_requests;
  load.make_request = slow;
  StreamGroup group(stub, load);
  group.Start();
  if (!group.WaitAllHaveTokens(absl::Seconds(60))) {
    return absl::DeadlineExceededError("not every stream produced a token within 60 s");
  }
  absl::SleepFor(absl::Seconds(1));
  figures->baseline_rss_loaded_kib = ReadRssKib(server->pid()).value_or(0);
  figures->baseline_kib_per_1000_streams =
      (figures->baseline_rss_loaded_kib - figures->baseline_rss_idle_kib) * 1000.0 /
      options.memory_requests;
  group.CancelAll();
  group.WaitDone(absl::Seconds(30));
  return absl::OkStatus();
}

}  // namespace

IdleFigures RunIdleAndMemory(const BenchOptions& options, BenchEnv& env) {
  std::fprintf(stderr, "idle CPU over %s, then memory with %d in flight\n",
               absl::FormatDuration(options.idle_time).c_str(), options.memory_requests);
  IdleFigures figures;
  // The shipped defaults for keepalive (a ping to each worker every 2 s, 1 s to
  // answer): idle cost is what a deployment pays. Slow steps keep 1,000
  // in-flight requests cheap to stream while RSS is read.
  PipelineShape shape;
  shape.step_time_us = 50000;
  shape.keepalive_ms = 2000;
  shape.keepalive_timeout_ms = 1000;
  absl::StatusOr<std::unique_ptr<Pipeline>> pipeline = OpenPipeline(env, shape);
  if (!pipeline.ok()) {
    figures.error = std::string(pipeline.status().message());
    return figures;
  }
  const Figures warm = RunLoad((*pipeline)->stub, 1, absl::ZeroDuration(),
                               [](int, int64_t seq) { return OrchestratorRequest("", 1, 4, seq); },
                               absl::Seconds(30));
  const std::vector<pid_t> workers = ChildPids((*pipeline)->server.pid());
  if (warm.failed != 0 || workers.empty()) {
    figures.error = absl::StrCat("warm-up failed: ", warm.error);
    return figures;
  }
  absl::SleepFor(absl::Seconds(1));
  struct Watched {
    std::string name;
    pid_t pid;
    ProcessCpu before;
  };
  std::vector<Watched> watched = {{"orchestrator", (*pipeline)->server.pid(), {}},
                                  {"stage_worker", workers[0], {}},
                                  {"baseline server (reference)", env.baseline.pid(), {}}};
  if (env.nginx.process != nullptr) {
    watched.push_back({"nginx (reference)", env.nginx.pid(), {}});
  }
  for (Watched& w : watched) w.before = ReadProcessCpu(w.pid).value_or(ProcessCpu{});
  const int64_t start = NowNs();
  absl::SleepFor(options.idle_time);
  figures.seconds = (NowNs() - start) / 1e9;
  const double scale = 10.0 / figures.seconds;
  for (const Watched& w : watched) {
    const ProcessCpu after = ReadProcessCpu(w.pid).value_or(ProcessCpu{});
    ProcessIdle& idle = figures.processes.emplace_back();
    idle.process = w.name;
    idle.sched_ms_per_10s = (after.sched_ns - w.before.sched_ns) / 1e6 * scale;
    idle.tick_ms_per_10s = (after.tick_ms - w.before.tick_ms) * scale;
  }

  figures.rss_idle_kib = ReadRssKib((*pipeline)->server.pid()).value_or(0);
  figures.worker_rss_idle_kib = ReadRssKib(workers[0]).value_or(0);
  std::unique_ptr<StreamGroup> group = StartLong(**pipeline, options.memory_requests, "mem-");
  if (!group->WaitAllHaveTokens(absl::Seconds(60))) {
    figures.error = "not every request produced a token within 60 s";
    return figures;
  }
  absl::SleepFor(absl::Seconds(1));
  figures.in_flight = options.memory_requests;
  figures.rss_loaded_kib = ReadRssKib((*pipeline)->server.pid()).value_or(0);
  figures.worker_rss_loaded_kib = ReadRssKib(workers[0]).value_or(0);
  figures.kib_per_1000_requests =
      (figures.rss_loaded_kib - figures.rss_idle_kib) * 1000.0 / options.memory_requests;
  group->CancelAll();
  group->WaitDone(absl::Seconds(30));
  group.reset();
  if (absl::Status s = MeasureBareGrpcMemory(options, env, &figures); !s.ok()) {
    figures.error = absl::StrCat("bare gRPC memory: ", s.message());
  }
  return figures;
}

}  // namespace bench
}  // namespace omnistage
