// The benchmark's baseline: the smallest server of omnistage.v1.Orchestrator's
// Generate that streams like an LLM front end would without a pipeline behind
// it. Callback API; one GenerateResponse per token, each with one OutputChunk
// whose payload is a TokenIds with one id, then one response with terminal STOP.
// No stages, no event loop, no coalescing: one write in flight per stream, the
// next token written when the previous write is done.
//
// A request says what to send in stage_params[0]: max_tokens (default 200) and
// extra["pace_us"] (default 0): the time between tokens, as a step time. Paced
// like the simulated engine paces its steps: token k is released `pace_us` after
// token k-1 was released (so timer overshoot accumulates the same way), and the
// first token `pace_us` after the call starts. With extra["stamp"] = "1" each
// token's response also carries a production stamp (common/production_stamp.h)
// taken as it is written: the baseline's emit time, for one-way latency.
//
// It runs in its own process (`pipeline_benchmark --serve_baseline`), so that
// the load generator never shares a process with the server it measures.
#ifndef OMNISTAGE_TESTS_BENCH_BASELINE_SERVER_H_
#define OMNISTAGE_TESTS_BENCH_BASELINE_SERVER_H_

#include <cstdint>
#include <string>

#include "protos/orchestrator.pb.h"

namespace omnistage {
namespace bench {

// A request for the baseline server: `tokens` tokens, `pace_us` apart.
// `stamp`: each token carries its production stamp (one-way latency).
v1::GenerateRequest BaselineRequest(const std::string& request_id, uint32_t tokens,
                                    int64_t pace_us, bool stamp = false);

// Serves on 127.0.0.1:0, prints its listening line (common/listening_line.h), and runs until
// SIGTERM or SIGINT. Returns the exit code.
int RunBaselineServer();

}  // namespace bench
}  // namespace omnistage

#endif  // OMNISTAGE_TESTS_BENCH_BASELINE_SERVER_H_
