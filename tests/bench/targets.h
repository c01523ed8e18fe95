// The server a row of //tests/bench:pipeline_benchmark measures, shared by the
// throughput, light-load and requests scenarios: the baseline server, a proxy
// in front of it, or a fresh orchestrator of 1 or 3 sim_llm stages; its
// processes (front first) and their CPU time.
#ifndef OMNISTAGE_TESTS_BENCH_TARGETS_H_
#define OMNISTAGE_TESTS_BENCH_TARGETS_H_

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tests/bench/bench_processes.h"
#include "tests/bench/load_generator.h"
#include "tests/bench/scenarios.h"

namespace omnistage {
namespace bench {

// A row's server for one step time: where to connect and how to ask.
struct Target {
  Server orchestrator;  // Only for orchestrator rows; stopped when the target goes.
  int stages = 0;       // The orchestrator's stages; 0 for the baseline and the proxies.
  int port = 0;
  RequestFactory make_request;
  std::string error;
  ~Target() { StopServer(orchestrator); }
};

// Requests for `target` of `tokens` tokens (the final stage's max_tokens), the
// baseline rows paced at `step_time_us` and stamped if `stamp`.
RequestFactory TargetRequests(const Target& target, int tokens, int64_t step_time_us, bool stamp);

// The rows of orch1 with tracing on (docs/benchmarks.md, "The cost of a
// request"): its spans exported over OTLP/gRPC to env.otlp_endpoint with a
// new trace sampled at a ratio of 0.01 (trace-0.01) or always (trace-1), or
// always to a collector that is down (trace-down). Their orchestrator serves
// /metrics (the spans it exported and dropped).
bool TracedRow(const std::string& row);

// Starts (or finds) the server for `row` (baseline, nginx, haproxy, relay-cb,
// relay-async, relay-async2, orch1, orch3, a traced row) with `step_time_us`;
// its make_request asks for `tokens` tokens. On failure `error` says why.
std::unique_ptr<Target> OpenTarget(const std::string& row, int64_t step_time_us, int tokens,
                                   bool stamp, BenchEnv& env);

// The processes serving a row, the front one first: the baseline; nginx (or
// haproxy, a relay) and the baseline; or an orchestrator and its workers.
std::vector<pid_t> ServingPids(const std::string& row, const Target& target, const BenchEnv& env);

// CPU time and runs on a CPU of `pids` together (schedstat).
ProcessCpu Cpu(const std::vector<pid_t>& pids);

// Connects and runs one short request, so that no cell pays for connecting; for
// an orchestrator, first waits until its replicas are alive. nullptr (and
// `target.error` set) on failure.
std::shared_ptr<v1::Orchestrator::Stub> Warm(Target& target);

}  // namespace bench
}  // namespace omnistage

#endif  // OMNISTAGE_TESTS_BENCH_TARGETS_H_
