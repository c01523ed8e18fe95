// The two measurements of failover_benchmark (docs/benchmarks.md), each on a
// pipeline of real processes it starts and stops itself (the test harness's
// stage workers and orchestrator, on 127.0.0.1):
//
//   Resume   one sim_llm stage of 2 replicas; `in_flight` long requests, bound
//            one by one so that each one's replica is known; once each has
//            `kill_after_tokens` tokens, kill -9 of replica 1. Per request of
//            the dead replica: the time from the kill to its first new output
//            (failover on: the resumed stream, after the replay caught up with
//            what was delivered) or to its error terminal (off); per request
//            of the other replica, its next output (the load's own pace).
//   Memory   sim_llm "first" (1 replica, zero-time steps) hands `replay_tokens`
//            tokens per request to "second" (2 replicas, streaming, slow): with
//            `requests` in flight, all past "first", the orchestrator's RSS
//            less its idle RSS, per request.
#ifndef OMNISTAGE_TESTS_BENCH_FAILOVER_SCENARIOS_H_
#define OMNISTAGE_TESTS_BENCH_FAILOVER_SCENARIOS_H_

#include <cstdint>
#include <vector>

namespace omnistage {
namespace bench {

struct ResumeOptions {
  bool failover = true;
  int in_flight = 64;
  int step_time_us = 10000;
  int kill_after_tokens = 100;
};

struct ResumeFigures {
  std::vector<double> victims_ms;    // Kill -> first new output (on) or terminal (off).
  std::vector<double> survivors_ms;  // Kill -> next output on the other replica.
  double replayed_tokens = 0;        // Mean tokens the victims had delivered at the kill.
  int victims_failed = 0;            // Victims that ended without new output.
  bool ok = false;                   // The pipeline ran; figures are valid.
};

ResumeFigures MeasureResume(const ResumeOptions& options);

struct MemoryOptions {
  bool failover = true;
  int requests = 1000;
  int replay_tokens = 2000;
};

struct MemoryFigures {
  int64_t idle_kib = 0;
  int64_t in_flight_kib = 0;
  double per_request_kib = 0;  // (in_flight - idle) / requests
  bool ok = false;
};

MemoryFigures MeasureMemory(const MemoryOptions& options);

}  // namespace bench
}  // namespace omnistage

#endif  // OMNISTAGE_TESTS_BENCH_FAILOVER_SCENARIOS_H_
