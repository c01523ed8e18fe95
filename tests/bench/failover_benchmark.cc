// failover_benchmark: what failover (docs/reliability.md) costs, with it off
// and on in the same run, each figure per run and as the spread (min..max)
// over --runs runs. No targets, no verdicts.
//
//   bazel run -c opt //tests/bench:failover_benchmark -- --runs=3
//
//   resume  kill -9 of one of two replicas under --in_flight long requests:
//           for the dead replica's requests, the time from the kill to their
//           first new output (on: resumed by replay; off: to their error
//           terminal, the detection alone), p50 and p99; the other replica's
//           requests' next output beside it (the load's own pace).
//   memory  the orchestrator's RSS with --memory_requests requests in flight,
//           each having handed --replay_tokens tokens to a failover stage,
//           less its idle RSS, per request: off, on, and the difference (the
//           replay buffers).
//
// Real processes on 127.0.0.1, stopped by PID (failover_scenarios.h).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "tests/bench/bench_processes.h"
#include "tests/bench/failover_scenarios.h"
#include "tests/bench/load_generator.h"

ABSL_FLAG(int, runs, 3, "times each mode runs; figures per run and as min..max");
ABSL_FLAG(int, in_flight, 64, "requests in flight at the kill");
ABSL_FLAG(int, step_time_us, 10000, "engine step time of the resume scenario");
ABSL_FLAG(int, kill_after_tokens, 100, "tokens every request has delivered before the kill");
ABSL_FLAG(int, memory_requests, 1000, "requests in flight for the memory figure");
ABSL_FLAG(int, replay_tokens, 2000, "tokens each request hands to the failover stage");
ABSL_FLAG(std::string, scenarios, "resume,memory", "which parts to run");

namespace omnistage {
namespace bench {
namespace {

// One figure of every run of one mode.
using Series = std::vector<double>;

const char* Mode(bool failover) { return failover ? "on" : "off"; }

// Calls `measure(failover)` --runs times with failover off, then on; `name`
// for the progress lines.
void EachRunAndMode(const std::string& name, const std::function<bool(bool)>& measure) {
  const int runs = std::max(1, absl::GetFlag(FLAGS_runs));
  for (int run = 0; run < runs; ++run) {
    for (bool failover : {false, true}) {
      const bool ok = measure(failover);
      std::cerr << name << " run " << run + 1 << " failover " << Mode(failover)
                << (ok ? " done" : " FAILED") << "\n";
    }
  }
}

void Resume() {
  std::map<bool, std::map<std::string, Series>> figures;
  EachRunAndMode("resume", [&](bool failover) {
    ResumeOptions options;
    options.failover = failover;
    options.in_flight = absl::GetFlag(FLAGS_in_flight);
    options.step_time_us = absl::GetFlag(FLAGS_step_time_us);
    options.kill_after_tokens = absl::GetFlag(FLAGS_kill_after_tokens);
    const ResumeFigures f = MeasureResume(options);
    if (!f.ok) return false;
    std::map<std::string, Series>& s = figures[failover];
    s["victims p50"].push_back(Percentile(f.victims_ms, 50));
    s["victims p99"].push_back(Percentile(f.victims_ms, 99));
    s["survivors p50"].push_back(Percentile(f.survivors_ms, 50));
    s["survivors p99"].push_back(Percentile(f.survivors_ms, 99));
    s["victims"].push_back(static_cast<double>(f.victims_ms.size() + f.victims_failed));
    s["victims without"].push_back(f.victims_failed);
    s["replayed"].push_back(f.replayed_tokens);
    return true;
  });
  std::cout << "# kill -9 of one of 2 replicas, " << absl::GetFlag(FLAGS_in_flight)
            << " in flight, " << absl::GetFlag(FLAGS_step_time_us) << " us steps, after "
            << absl::GetFlag(FLAGS_kill_after_tokens) << " tokens: per run, then (min..max)\n\n";
  for (bool failover : {false, true}) {
    std::map<std::string, Series>& s = figures[failover];
    const char* what = failover ? "first resumed output" : "error terminal";
    std::cout << "failover " << Mode(failover) << ":\n"
              << "  victims (requests of the dead replica) " << Spread(s["victims"], 0) << "\n"
              << "  kill -> " << what << " p50 ms  " << Spread(s["victims p50"], 1) << "\n"
              << "  kill -> " << what << " p99 ms  " << Spread(s["victims p99"], 1) << "\n"
              << "  victims without one                   " << Spread(s["victims without"], 0)
              << "\n"
              << "  tokens delivered before the kill      " << Spread(s["replayed"], 0) << "\n"
              << "  other replica, next output p50 ms     " << Spread(s["survivors p50"], 1)
              << "\n"
              << "  other replica, next output p99 ms     " << Spread(s["survivors p99"], 1)
              << "\n";
  }
  Series ratio;
  const Series& on = figures[true]["victims p50"];
  const Series& off = figures[false]["victims p50"];
  for (size_t i = 0; i < std::min(on.size(), off.size()); ++i) {
    if (off[i] > 0) ratio.push_back(on[i] / off[i]);
  }
  std::cout << "resumed output p50 / error terminal p50 (same run) " << Spread(ratio, 2)
            << "\n\n";
}

void Memory() {
  std::map<bool, Series> per_request, idle, busy;
  EachRunAndMode("memory", [&](bool failover) {
    MemoryOptions options;
    options.failover = failover;
    options.requests = absl::GetFlag(FLAGS_memory_requests);
    options.replay_tokens = absl::GetFlag(FLAGS_replay_tokens);
    const MemoryFigures f = MeasureMemory(options);
    if (!f.ok) return false;
    per_request[failover].push_back(f.per_request_kib);
    idle[failover].push_back(static_cast<double>(f.idle_kib));
    busy[failover].push_back(static_cast<double>(f.in_flight_kib));
    return true;
  });
  const int requests = absl::GetFlag(FLAGS_memory_requests);
  const int tokens = absl::GetFlag(FLAGS_replay_tokens);
  std::cout << "# orchestrator RSS, " << requests << " in flight, each past a hand-off of "
            << tokens << " tokens (" << tokens * 4 / 1024.0
            << " KiB of token ids) to a failover stage: per run, then (min..max)\n\n";
  for (bool failover : {false, true}) {
    std::cout << "failover " << Mode(failover) << ":\n"
              << "  idle KiB                 " << Spread(idle[failover], 0) << "\n"
              << "  in flight KiB            " << Spread(busy[failover], 0) << "\n"
              << "  per request KiB          " << Spread(per_request[failover], 2) << "\n";
  }
  Series extra;
  for (size_t i = 0; i < std::min(per_request[true].size(), per_request[false].size()); ++i) {
    extra.push_back(per_request[true][i] - per_request[false][i]);
  }
  std::cout << "replay buffers per request KiB (on - off, same run) " << Spread(extra, 2)
            << "\n";
}

int Run(const std::string& /*dir*/) {
  const std::string scenarios = absl::GetFlag(FLAGS_scenarios);
  if (scenarios.find("resume") != std::string::npos) Resume();
  if (scenarios.find("memory") != std::string::npos) Memory();
  return 0;
}

}  // namespace
}  // namespace bench
}  // namespace omnistage

int main(int argc, char** argv) {
  return omnistage::bench::RunInScratchDir(argc, argv, omnistage::bench::Run);
}
