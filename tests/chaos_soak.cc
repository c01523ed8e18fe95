// chaos_soak: many requests through a real two-stage pipeline while replicas are
// killed and restarted, stopped and resumed, and one replica's engine fails
// fatally every few thousand steps; clients abort, cancel and give up on
// deadlines at random (fixed seeds). Then it checks what must hold:
//   - every request ended exactly once: one terminal, or one call error;
//   - every request that finished normally produced exactly what a fault-free
//     run of the same prompt and seed produced;
//   - nothing is left: no request in flight, no binding, no worker running work;
//   - the orchestrator's allocated heap (within 10%), its resident memory (the
//     same, beyond what its allocator keeps free for reuse), file descriptors
//     and own threads are back where they were before the faults; gRPC's thread
//     pools may have grown by a few threads (bounded, not per request).
// With --failover every stage of 2+ replicas has `failover:` on
// (docs/reliability.md), and one more check holds: no request ends with an
// ERROR terminal except when a whole stage was down — as many ERROR terminals
// at most as the orchestrator counted failovers that found no live replica —
// and each such error names its stage.
// It prints what happened and exits 1 if any check failed.
//
//   bazel run -c opt //tests:chaos_soak -- --requests=1000000   # the long soak
//   bazel run -c opt //tests:chaos_soak -- --requests=1000000 --failover
//
// `bazel test //tests:chaos_soak_test` runs a few thousand requests, and
// `//tests:chaos_soak_failover_test` the same with --failover.
#include <dirent.h>
#include <signal.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/match.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "tests/failover_metrics.h"
#include "tests/pipeline_harness.h"
#include "tests/pipeline_test_util.h"

ABSL_FLAG(int, requests, 3000, "requests in the chaos run");
ABSL_FLAG(int, clients, 16, "concurrent clients");
ABSL_FLAG(int, shapes, 256, "distinct (prompt, seed, lengths) the requests cycle through");
ABSL_FLAG(uint64_t, seed, 1, "seed of every random choice");
ABSL_FLAG(int, step_time_us, 500, "engine step time in both stages");
ABSL_FLAG(int, fault_every_ms, 250, "mean pause between replica faults");
ABSL_FLAG(int, fatal_every_steps, 4000, "replica 1 of stage 1 fails fatally at this step");
ABSL_FLAG(bool, failover, false,
          "failover on for every stage of 2+ replicas; then only a whole stage down may fail "
          "a request");

namespace omnistage {
namespace {

// A request resumed this often would be failing for its own reasons; the
// config's ceiling, so that only a whole stage down can fail one.
constexpr int kFailoverAttempts = 16;

// A client's tries of one Abort; clients retry one that failed on some stage.
constexpr int kAbortAttempts = 5;
std::atomic<int> abort_retries{0};

// Under AddressSanitizer freed memory is held in quarantine (256 MiB by default),
// so RSS says nothing about leaks there; the sanitizer build checks everything
// else, and the plain builds check memory.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kRssMeansSomething = false;
#else
constexpr bool kRssMeansSomething = true;
#endif

enum class ClientFault { kNone, kAbort, kCancel, kDeadline };
const char* kFaultNames[] = {"plain", "abort", "cancel", "deadline"};

struct Shape {
  std::string prompt;
  uint64_t seed = 0;
  uint32_t first_tokens = 0;
  uint32_t second_tokens = 0;
};

v1::GenerateRequest RequestFor(const std::string& id, const Shape& shape) {
  v1::StageParameters first = StageParams(0, shape.first_tokens);
  first.set_seed(shape.seed);
  v1::StageParameters second = StageParams(1, shape.second_tokens);
  second.set_seed(shape.seed);
  return MakeRequest(id, shape.prompt, {first, second});
}

PipelineSpec ChaosSpec() {
  const std::string params =
      absl::StrCat("batch_size=64,step_time_us=", absl::GetFlag(FLAGS_step_time_us));
  PipelineSpec spec;
  spec.name = "chaos";
  spec.keepalive_ms = 300;
  spec.keepalive_timeout_ms = 300;
  spec.request_idle_timeout_ms = 10000;
  spec.worker_abort_timeout_ms = 1000;
  spec.stages.push_back(Stage("first", "sim_llm", params, 2, false, "tokens"));
  StageSpec second = Stage("second", "sim_llm", params, 2, true, "tokens", "streaming");
  second.replica_flags = {{}, {absl::StrCat("--engine_params=", params, ",fail_at_step=",
                                            absl::GetFlag(FLAGS_fatal_every_steps))}};
  spec.stages.push_back(second);
  if (absl::GetFlag(FLAGS_failover)) {
    for (StageSpec& stage : spec.stages) {
      if (stage.replicas >= 2) stage.failover_max_attempts = kFailoverAttempts;
    }
  }
  // Failovers and the heap are read from the orchestrator's metrics.
  spec.orchestrator_flags.push_back("--metrics_listen=127.0.0.1:0");
  return spec;
}

// omnistage_heap_bytes{state=...} of the orchestrator's /metrics, in kB: what
// it has allocated, and what its allocator keeps free (common/allocator.h).
struct HeapStats {
  int64_t allocated_kb = 0;
  int64_t cached_kb = 0;
};

HeapStats HeapOf(int metrics_port) {
  HeapStats heap;
  absl::StatusOr<std::string> metrics = ScrapeMetrics(metrics_port);
  if (!metrics.ok()) return heap;
  for (absl::string_view line : absl::StrSplit(*metrics, '\n')) {
    for (auto [state, kb] : {std::pair<const char*, int64_t*>{"allocated", &heap.allocated_kb},
                             {"cached", &heap.cached_kb}}) {
      const std::string series = absl::StrCat("omnistage_heap_bytes{state=\"", state, "\"} ");
      double bytes = 0;
      if (absl::ConsumePrefix(&line, series) && absl::SimpleAtod(line, &bytes)) {
        *kb = static_cast<int64_t>(bytes / 1024);
      }
    }
  }
  return heap;
}

// What /proc says of a process.
struct ProcessStats {
  int64_t rss_kb = 0;
  int64_t threads = 0;
  // Threads named by the orchestrator's own code (the main and the event loop
  // thread keep the process's name); the rest are gRPC's pools.
  int64_t own_threads = 0;
  int64_t fds = 0;
};

ProcessStats StatsOf(pid_t pid) {
  ProcessStats stats;
  std::ifstream status(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(status, line)) {
    int64_t value = 0;
    auto field = [&](absl::string_view name) {
      if (!absl::StartsWith(line, name)) return false;
      std::string rest = line.substr(name.size());
      rest = rest.substr(0, rest.find(" kB"));
      return absl::SimpleAtoi(absl::StripAsciiWhitespace(rest), &value);
    };
    if (field("VmRSS:")) stats.rss_kb = value;
    if (field("Threads:")) stats.threads = value;
  }
  if (DIR* dir = opendir(absl::StrCat("/proc/", pid, "/fd").c_str())) {
    while (dirent* entry = readdir(dir)) stats.fds += entry->d_name[0] != '.';
    closedir(dir);
  }
  if (DIR* dir = opendir(absl::StrCat("/proc/", pid, "/task").c_str())) {
    while (dirent* entry = readdir(dir)) {
      if (entry->d_name[0] == '.') continue;
      std::string name;
      std::getline(std::ifstream(absl::StrCat("/proc/", pid, "/task/", entry->d_name, "/comm")),
                   name);
      stats.own_threads += name == "orchestrator";
    }
    closedir(dir);
  }
  return stats;
}

// Replica faults, one at a time, from a thread of its own (the only one that
// controls processes): kill -9 and restart, SIGSTOP and SIGCONT, and restarts
// of the replica whose engine failed fatally. The workers it restarts die with
// the thread that started them (PR_SET_PDEATHSIG), so after `stop` it keeps its
// thread until `release`.
class FaultInjector {
 public:
  explicit FaultInjector(PipelineHarness* pipeline) : pipeline_(pipeline) {}

  void Run(std::atomic<bool>* stop, absl::Notification* release) {
    std::mt19937_64 rng(absl::GetFlag(FLAGS_seed) * 7919);
    const int every = absl::GetFlag(FLAGS_fault_every_ms);
    while (!*stop) {
      absl::SleepFor(absl::Milliseconds(every / 2 + rng() % (every + 1)));
      RestartFailed();
      const int stage = rng() % 2;
      const int replica = rng() % 2;
      if (rng() % 2 == 0) {
        pipeline_->KillWorker(stage, replica);
        ++kills;
        absl::SleepFor(absl::Milliseconds(100 + rng() % 200));
        Restart(stage, replica);
      } else {
        pipeline_->worker_process(stage, replica)->Signal(SIGSTOP);
        ++stops;
        absl::SleepFor(absl::Milliseconds(200 + rng() % 600));
        pipeline_->worker_process(stage, replica)->Signal(SIGCONT);
      }
    }
    RestartFailed();
    stopped.Notify();
    release->WaitForNotification();
  }

  absl::Notification stopped;
  int kills = 0, stops = 0, fatal_restarts = 0, failed_restarts = 0;

 private:
  void RestartFailed() {
    for (int s = 0; s < 2; ++s) {
      for (int r = 0; r < 2; ++r) {
        if (!pipeline_->worker_process(s, r)->Wait(absl::ZeroDuration()).has_value()) continue;
        ++fatal_restarts;
        Restart(s, r);
      }
    }
  }
  void Restart(int stage, int replica) {
    if (!pipeline_->RestartWorker(stage, replica).ok()) ++failed_restarts;
  }

  PipelineHarness* const pipeline_;
};

struct Outcome {
  ClientFault fault = ClientFault::kNone;
  int shape = 0;
  GenerateResult result;
};

// One request with its client-side fault, start to end.
Outcome RunOne(PipelineHarness& pipeline, int index, const std::vector<Shape>& shapes) {
  std::mt19937_64 rng(absl::GetFlag(FLAGS_seed) * 1000003 + index);
  Outcome out;
  out.shape = index % static_cast<int>(shapes.size());
  const int dice = rng() % 100;
  out.fault = dice < 8    ? ClientFault::kAbort
              : dice < 13 ? ClientFault::kCancel
              : dice < 18 ? ClientFault::kDeadline
                          : ClientFault::kNone;
  const std::string id = absl::StrCat("chaos-", index);
  const absl::Duration deadline = out.fault == ClientFault::kDeadline
                                      ? absl::Milliseconds(5 + rng() % 40)
                                      : absl::Seconds(60);
  std::unique_ptr<GenerateCall> call =
      pipeline.StartGenerate(RequestFor(id, shapes[out.shape]), deadline);
  const absl::Duration delay = absl::Milliseconds(rng() % 25);
  if (out.fault == ClientFault::kAbort) {
    absl::SleepFor(delay);
    // As clients are told to (docs/orchestrator.md): an abort that failed on
    // some stage (a replica stopped or died under it) is tried again; until
    // then the stages it already stopped produce nothing more.
    for (int attempt = 0; attempt < kAbortAttempts; ++attempt) {
      absl::StatusOr<v1::AbortResponse> answer = pipeline.Abort({id}, absl::Seconds(5));
      if (answer.ok() && answer->results_size() == 1 &&
          answer->results(0).outcome() != v1::AbortResult::OUTCOME_FAILED) {
        break;
      }
      ++abort_retries;
      absl::SleepFor(absl::Milliseconds(100) * (attempt + 1));
    }
  } else if (out.fault == ClientFault::kCancel) {
    absl::SleepFor(delay);
    call->Cancel();
  }
  out.result = call->Wait(absl::Seconds(60));
  return out;
}

// Checks one outcome against the rules; returns what is wrong, or "".
std::string Check(const Outcome& o, const std::vector<std::vector<int32_t>>& expected) {
  const GenerateResult& r = o.result;
  const std::string who = absl::StrCat(kFaultNames[static_cast<int>(o.fault)], " ", r.Summary());
  if (!r.done) return absl::StrCat("never ended: ", who);
  if (r.responses_after_terminal != 0) return absl::StrCat("output after its terminal: ", who);
  if (r.status.ok()) {
    if (r.terminals != 1) return absl::StrCat("ended OK without exactly one terminal: ", who);
  } else {
    const grpc::StatusCode code = r.status.error_code();
    const bool client_gave_up = (o.fault == ClientFault::kCancel && code == grpc::CANCELLED) ||
                                (o.fault == ClientFault::kDeadline &&
                                 code == grpc::DEADLINE_EXCEEDED);
    // Before a terminal, only the client's own ending may end the call with an error,
    // or stage 0 having no live replica at all.
    const bool no_replica =
        code == grpc::UNAVAILABLE && absl::StrContains(r.status.error_message(), "no live replica");
    if (!client_gave_up && !no_replica) return absl::StrCat("unexpected call error: ", who);
    if (r.terminals > 1) return absl::StrCat("two terminals: ", who);
    return "";
  }
  switch (r.terminal.finish_reason()) {
    case v1::FINISH_REASON_LENGTH:
    case v1::FINISH_REASON_STOP:
      if (r.tokens != expected[o.shape]) return absl::StrCat("output differs from fault-free: ", who);
      return "";
    case v1::FINISH_REASON_ABORT:
      if (o.fault == ClientFault::kNone || o.fault == ClientFault::kDeadline) {
        return absl::StrCat("aborted though nobody asked: ", who);
      }
      return "";
    case v1::FINISH_REASON_ERROR: {
      const v1::Error& error = r.terminal.error();
      if (error.message().empty()) return absl::StrCat("error says nothing: ", who);
      // With failover only a whole stage down fails a request (counted in Run),
      // and its error names that stage.
      const char* stage_names[] = {"first", "second"};
      if (absl::GetFlag(FLAGS_failover) &&
          (error.stage_id() < 0 || error.stage_id() > 1 ||
           !absl::StrContains(error.message(), stage_names[error.stage_id()]))) {
        return absl::StrCat("error names no stage: ", who);
      }
      return "";
    }
    default:
      return absl::StrCat("no finish reason: ", who);
  }
}

// With failover: the orchestrator's failovers by outcome, printed; an ERROR
// terminal that does not say "no live replica" is allowed only for a failover
// that found none.
void CheckFailovers(int metrics_port, int error_terminals, std::vector<std::string>* problems) {
  absl::StatusOr<std::string> metrics = ScrapeMetrics(metrics_port);
  if (!metrics.ok()) {
    problems->push_back(absl::StrCat("no failover counts: ", metrics.status().message()));
    return;
  }
  std::printf("failovers:");
  for (const char* outcome : {"resumed", "no_live_replica", "attempts_exhausted",
                              "replay_too_large", "not_resumable", "replay_mismatch"}) {
    std::printf(" %s %lld", outcome, static_cast<long long>(FailoverCountIn(*metrics, outcome)));
  }
  std::printf("\n");
  const int64_t stage_down = FailoverCountIn(*metrics, "no_live_replica");
  if (error_terminals > stage_down) {
    problems->push_back(absl::StrCat(error_terminals, " ERROR terminals with failover on (not "
                                     "entering a stage with no live replica), but only ",
                                     stage_down, " failovers found their stage down"));
  }
}

int Run() {
  const int requests = absl::GetFlag(FLAGS_requests);
  absl::StatusOr<std::unique_ptr<PipelineHarness>> started = PipelineHarness::Start(ChaosSpec());
  if (!started.ok()) {
    std::fprintf(stderr, "chaos_soak: %s\n", std::string(started.status().message()).c_str());
    return 1;
  }
  PipelineHarness& pipeline = **started;

  // The fault-free run: what each shape produces.
  std::mt19937_64 rng(absl::GetFlag(FLAGS_seed));
  std::vector<Shape> shapes(absl::GetFlag(FLAGS_shapes));
  std::vector<v1::GenerateRequest> reference;
  for (size_t i = 0; i < shapes.size(); ++i) {
    shapes[i] = Shape{absl::StrCat("shape ", i, " says ", rng() % 100000), rng(),
                      static_cast<uint32_t>(4 + rng() % 24), static_cast<uint32_t>(8 + rng() % 56)};
    reference.push_back(RequestFor(absl::StrCat("ref-", i), shapes[i]));
  }
  // No fault is injected yet, but a slow machine (a sanitizer build, say) can
  // still miss a 300 ms keepalive: a shape whose reference failed is run again.
  std::vector<std::vector<int32_t>> expected(shapes.size());
  std::vector<GenerateResult> results = pipeline.GenerateAll(reference);
  for (size_t i = 0; i < shapes.size(); ++i) {
    for (int attempt = 1; results[i].terminal.finish_reason() != v1::FINISH_REASON_LENGTH;
         ++attempt) {
      if (attempt == 5) {
        std::fprintf(stderr, "chaos_soak: the fault-free run failed: %s\n",
                     results[i].Summary().c_str());
        return 1;
      }
      (void)pipeline.WaitAllAlive(absl::Seconds(30));
      results[i] = pipeline.Generate(
          RequestFor(absl::StrCat("ref-", i, "-", attempt), shapes[i]));
    }
    expected[i] = results[i].tokens;
  }
  const pid_t orchestrator = pipeline.orchestrator()->pid();
  const ProcessStats before = StatsOf(orchestrator);
  const int metrics_port = pipeline.orchestrator_metrics_port();
  const HeapStats heap_before = HeapOf(metrics_port);

  // The chaos run.
  const absl::Time start = absl::Now();
  std::atomic<bool> stop{false};
  absl::Notification release;
  FaultInjector faults(&pipeline);
  std::thread injector([&] { faults.Run(&stop, &release); });
  std::atomic<int> next{0};
  absl::Mutex mu;
  std::map<std::string, int> tally;
  int error_terminals = 0;  // Those that do not say "no live replica".
  std::vector<std::string> problems;
  std::vector<std::thread> clients;
  for (int c = 0; c < absl::GetFlag(FLAGS_clients); ++c) {
    clients.emplace_back([&] {
      for (int i = next++; i < requests; i = next++) {
        const Outcome o = RunOne(pipeline, i, shapes);
        const std::string problem = Check(o, expected);
        const std::string kind = absl::StrCat(
            kFaultNames[static_cast<int>(o.fault)], " -> ",
            o.result.status.ok() ? v1::FinishReason_Name(o.result.terminal.finish_reason())
                                 : absl::StrCat("call error ", o.result.status.error_code()));
        absl::MutexLock lock(&mu);
        ++tally[kind];
        // A request entering a stage with no live replica fails there without
        // any failover (docs/reliability.md): a whole stage down, self-evident.
        error_terminals += o.result.status.ok() &&
                           o.result.terminal.finish_reason() == v1::FINISH_REASON_ERROR &&
                           !absl::StrContains(o.result.terminal.error().message(),
                                              "no live replica");
        if (!problem.empty()) problems.push_back(problem);
      }
    });
  }
  for (std::thread& t : clients) t.join();
  const absl::Duration took = absl::Now() - start;
  stop = true;
  faults.stopped.WaitForNotification();

  // Everything back: every replica alive, nothing in flight, nothing running.
  for (int s = 0; s < 2; ++s) {
    for (int r = 0; r < 2; ++r) pipeline.worker_process(s, r)->Signal(SIGCONT);
  }
  if (absl::Status alive = pipeline.WaitAllAlive(absl::Seconds(60)); !alive.ok()) {
    problems.push_back(absl::StrCat("replicas not back: ", alive.message()));
  }
  std::string why;
  if (!Eventually([&] { return PipelineIsIdle(pipeline, &why); }, absl::Seconds(60),
                  absl::Milliseconds(100))) {
    problems.push_back(absl::StrCat("not idle after the run: ", why));
  }
  if (absl::GetFlag(FLAGS_failover)) {
    CheckFailovers(metrics_port, error_terminals, &problems);
  }
  // What the orchestrator has allocated must come back (within 10% and 2 MiB);
  // so must its resident memory, but for what its allocator says it keeps free
  // for reuse (TCMalloc's caches; the orchestrator gives its free pages back
  // once idle). Descriptors and its own threads must come back. gRPC sizes its
  // pools (event engine, timers) by load and keeps what it grew, within a few
  // threads: that is bounded, not per request.
  ProcessStats after;
  HeapStats heap_after;
  const absl::Time idle_at = absl::Now();
  const bool settled = Eventually(
      [&] {
        after = StatsOf(orchestrator);
        heap_after = HeapOf(metrics_port);
        const bool memory =
            heap_after.allocated_kb <= heap_before.allocated_kb * 110 / 100 + 2048 &&
            after.rss_kb <= before.rss_kb * 110 / 100 + 2048 + heap_after.cached_kb;
        return (!kRssMeansSomething || memory) && after.own_threads <= before.own_threads &&
               after.threads <= before.threads + 8 && after.fds <= before.fds + 2;
      },
      absl::Seconds(60), absl::Milliseconds(500));
  const absl::Duration settling = absl::Now() - idle_at;
  if (!settled) {
    problems.push_back(absl::StrCat("orchestrator did not come back within 60 s: allocated ",
                                    heap_before.allocated_kb, " -> ", heap_after.allocated_kb,
                                    " kB, rss ", before.rss_kb, " -> ", after.rss_kb,
                                    " kB (the allocator keeps ", heap_after.cached_kb,
                                    " kB free), threads ",
                                    before.threads, " -> ", after.threads, " (own ",
                                    before.own_threads, " -> ", after.own_threads, "), fds ",
                                    before.fds, " -> ", after.fds));
  }

  std::printf("chaos soak: %d requests by %d clients in %s (%.0f requests/s), seed %llu\n",
              requests, absl::GetFlag(FLAGS_clients), absl::FormatDuration(took).c_str(),
              requests / absl::ToDoubleSeconds(took),
              static_cast<unsigned long long>(absl::GetFlag(FLAGS_seed)));
  std::printf("faults: %d kill -9 + restart, %d SIGSTOP + SIGCONT, %d restarts after a fatal "
              "step or a kill; %d restarts failed\n",
              faults.kills, faults.stops, faults.fatal_restarts, faults.failed_restarts);
  std::printf("abort calls retried (one failed on some stage): %d\n", abort_retries.load());
  for (const auto& [kind, count] : tally) std::printf("  %-40s %d\n", kind.c_str(), count);
  std::printf(
      "orchestrator: allocated %lld -> %lld kB, rss %lld -> %lld kB (the allocator keeps %lld kB "
      "free), threads %lld -> %lld (own %lld -> %lld), fds %lld -> %lld (%s after idle)\n",
      static_cast<long long>(heap_before.allocated_kb),
      static_cast<long long>(heap_after.allocated_kb), static_cast<long long>(before.rss_kb),
      static_cast<long long>(after.rss_kb), static_cast<long long>(heap_after.cached_kb),
      static_cast<long long>(before.threads), static_cast<long long>(after.threads),
      static_cast<long long>(before.own_threads), static_cast<long long>(after.own_threads),
      static_cast<long long>(before.fds), static_cast<long long>(after.fds),
      absl::FormatDuration(settling).c_str());
  // Idle a little longer: the orchestrator has handed its free pages back.
  absl::SleepFor(absl::Seconds(3));
  const HeapStats heap_idle = HeapOf(metrics_port);
  std::printf("orchestrator 3 s later: rss %lld kB (the allocator keeps %lld kB free)\n",
              static_cast<long long>(StatsOf(orchestrator).rss_kb),
              static_cast<long long>(heap_idle.cached_kb));
  release.Notify();
  injector.join();
  if (!kRssMeansSomething) std::printf("(RSS not checked: an AddressSanitizer build)\n");
  if (problems.empty()) {
    std::printf("all checks hold\n");
    return 0;
  }
  std::printf("%zu problems; the first ones:\n", problems.size());
  for (size_t i = 0; i < problems.size() && i < 20; ++i) std::printf("  %s\n", problems[i].c_str());
  return 1;
}

}  // namespace
}  // namespace omnistage

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return omnistage::Run();
}
