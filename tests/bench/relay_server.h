// Two relays of omnistage.v1.Orchestrator's Generate, the smallest programs
// that do what the orchestrator's hop does with gRPC: take a client's call,
// open one to the baseline server, and write each response read from it to the
// client, one write in flight, the rest queued. No core, no event loop, no
// coalescing. They tell how much of the orchestrator's added latency gRPC's
// API costs and how much is its own work (docs/orchestrator.md, "The hop").
//
// - callback: gRPC's callback API on both sides, as the orchestrator uses it: a
//   read completes on one of gRPC's threads, which starts the client's write;
//   the write's completion runs on one of gRPC's threads.
// - async: gRPC's asynchronous API, `threads` threads each polling its own
//   completion queue, where a call's server side and its upstream call live
//   together: the thread that reads a response writes it and sees the write
//   complete; no hand-off between threads.
//
// Each runs in its own process (`pipeline_benchmark --serve_relay=API
// --relay_upstream=HOST:PORT`), prints its listening line and runs until
// SIGTERM or SIGINT.
#ifndef OMNISTAGE_TESTS_BENCH_RELAY_SERVER_H_
#define OMNISTAGE_TESTS_BENCH_RELAY_SERVER_H_

#include <string>

namespace omnistage {
namespace bench {

// Serves on 127.0.0.1:0 with the callback API. Returns the exit code.
int RunCallbackRelay(const std::string& upstream);

// Serves on 127.0.0.1:0 with the asynchronous API and `threads` polling
// threads. Returns the exit code.
int RunAsyncRelay(const std::string& upstream, int threads);

}  // namespace bench
}  // namespace omnistage

#endif  // OMNISTAGE_TESTS_BENCH_RELAY_SERVER_H_
