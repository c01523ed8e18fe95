// The requests scenario of //tests/bench:pipeline_benchmark: what a request
// costs. options.request_streams clients each send requests of few outputs
// back to back for options.request_time, at zero step time, one cell per
// row and count of outputs (options.request_outputs):
//
//   baseline   the baseline server (env.baseline), the load generator's streams
//   orch1      a fresh orchestrator of one sim_llm stage, the same streams
//   orch3      a fresh orchestrator of three sim_llm stages (the upstream two
//              make 8 tokens each), the same streams
//   text-grpc  a fresh orchestrator of one thinker stage (text; tokens are
//              words), one blocking gRPC client thread per slot (gateway_load.h)
//   gateway    the OpenAI gateway in front of that orchestrator: streamed chat
//              completions (SSE), one keep-alive connection per slot
//
// text-grpc runs whenever gateway does, in the same processes, so that the
// gateway's figures have a reference from the same run. Every process a row
// starts is stopped by PID before the next row starts, also on failure.
#ifndef OMNISTAGE_TESTS_BENCH_REQUEST_SCENARIOS_H_
#define OMNISTAGE_TESTS_BENCH_REQUEST_SCENARIOS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tests/bench/scenarios.h"

namespace omnistage {
namespace bench {

// `gateway_binary`: the gateway (FindGateway); when it is an error, the
// gateway and text-grpc rows show that error instead of figures.
std::vector<RequestCell> RunRequests(const BenchOptions& options, BenchEnv& env,
                                     const absl::StatusOr<std::string>& gateway_binary);

}  // namespace bench
}  // namespace omnistage

#endif  // OMNISTAGE_TESTS_BENCH_REQUEST_SCENARIOS_H_
