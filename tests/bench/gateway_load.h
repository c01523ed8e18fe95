// The processes and clients of //tests/bench:gateway_benchmark: an orchestrator
// whose one stage writes text (the thinker engine) with the OpenAI-compatible
// gateway in front of it, and clients that count tokens the same way: the
// words of the text, from the gRPC API's TextDeltas or the SSE events'
// choices[0].delta.content. Not the pieces: when a client lags, the
// orchestrator folds the words of consecutive steps into one TextDelta (one
// event), so a piece can hold many tokens.
//
//   RunSlots + GrpcCaller   N slots of back-to-back Generate calls, straight to
//                           the orchestrator
//   RunSlots + SseCaller    the same through the gateway, streamed as SSE
//   RunSwarm                thousands of SSE streams held open from one thread
//                           (non-blocking sockets, epoll): many_streams.h
//
// The load generator's StreamGroup (load_generator.h) counts token ids only, so
// text is invisible to it; hence the blocking callers here. Both the
// gRPC and the HTTP caller are one blocking thread per stream, so the client's
// own cost is alike on both sides of a comparison.
//
//   auto stack = GatewayStack::Start(binaries, gateway_binary, dir, /*step_time_us=*/0);
//   SlotLoad load;
//   load.streams = 64;
//   load.run_for = absl::Seconds(3);
//   load.open = [&](int) { return SseCaller((*stack)->gateway.port, 200); };
//   SlotTotals totals = RunSlots(load);
#ifndef OMNISTAGE_TESTS_BENCH_GATEWAY_LOAD_H_
#define OMNISTAGE_TESTS_BENCH_GATEWAY_LOAD_H_

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "protos/orchestrator.grpc.pb.h"
#include "tests/bench/bench_processes.h"

namespace omnistage {
namespace bench {

// The model id the gateway serves in this benchmark.
inline constexpr char kGatewayModel[] = "gateway-bench";

// The gateway binary: in the runfiles (gateway/gateway), or beside the
// orchestrator's output directory (bazel-bin/gateway/gateway).
absl::StatusOr<std::string> FindGateway(const char* argv0, const Binaries& binaries);

// What a benchmark of the gateway starts its processes from: the binaries,
// the gateway's, and a temporary directory for their files.
struct GatewayBinaries {
  Binaries binaries;
  std::string gateway;
  std::unique_ptr<TempDir> dir;
};
absl::StatusOr<GatewayBinaries> FindGatewayBinaries(const char* argv0);

// One thinker stage (1 replica, capacity `batch_size`, one word per step of
// `step_time_us`), text out. Its paragraphs are 100 sentences (300 to 900
// words), so a request of up to 300 tokens always ends by max_tokens.
std::string ThinkerPipelineYaml(int64_t step_time_us, int batch_size);

// An orchestrator of ThinkerPipelineYaml and a gateway in front of it. Start
// returns once the replica is alive and one short request went through each,
// so that no measurement pays for connecting. Both are stopped by PID when this
// goes away (the gateway first). Start it from the main thread
// (PR_SET_PDEATHSIG follows the starting thread).
struct GatewayStack {
  struct Options {
    int64_t step_time_us = 0;
    // The thinker's capacity (requests in one step).
    int batch_size = 4096;
    // The pipeline's limits.batch_reserve (below 0: its default).
    double batch_reserve = -1;
    // More gateway flags (the Batch API's, say).
    std::vector<std::string> gateway_flags;
  };
  static absl::StatusOr<std::unique_ptr<GatewayStack>> Start(const Binaries& binaries,
                                                             const std::string& gateway_binary,
                                                             const std::string& dir,
                                                             int64_t step_time_us) {
    Options options;
    options.step_time_us = step_time_us;
    return Start(binaries, gateway_binary, dir, options);
  }
  static absl::StatusOr<std::unique_ptr<GatewayStack>> Start(const Binaries& binaries,
                                                             const std::string& gateway_binary,
                                                             const std::string& dir,
                                                             const Options& options);
  ~GatewayStack();

  Server orchestrator;
  Server gateway;
  std::shared_ptr<v1::Orchestrator::Stub> stub;
};

// `Threads:` from /proc/<pid>/status.
absl::StatusOr<int> ReadThreadCount(pid_t pid);

// Reads a server-sent event stream (the de-chunked HTTP body) as the gateway
// writes it: "data: {chunk}\n\n" events ending with "data: [DONE]\n\n".
class SseReader {
 public:
  // Feeds the next bytes; returns the tokens (words of delta.content) of the
  // events they completed.
  int64_t Feed(absl::string_view data);
  // "data: [DONE]" came.
  bool done() const { return done_; }
  // The data of an error event ({"error": ...}), if one came.
  const std::string& error() const { return error_; }

 private:
  std::string pending_;  // An incomplete event.
  bool done_ = false;
  std::string error_;
};

// One request as a client saw it; times are NowNs() (load_generator.h).
struct CallResult {
  int64_t start_ns = 0;
  int64_t first_token_ns = 0;  // 0: no token came.
  int64_t end_ns = 0;
  int64_t tokens = 0;
  std::string error;  // Empty when it ended well (finish reason stop or length).
};
// Runs one request (request number `seq`) to its end, blocking.
using Caller = std::function<CallResult(int64_t seq)>;

// Requests of `tokens` tokens straight to the orchestrator.
Caller GrpcCaller(std::shared_ptr<v1::Orchestrator::Stub> stub, uint32_t tokens);
// Requests of `tokens` tokens through the gateway on 127.0.0.1:port, on one
// keep-alive connection, opened here (a GET /v1/models) so that the first
// measured request does not pay for it.
Caller SseCaller(int port, uint32_t tokens);

// The body of a streamed chat completion of `max_tokens`.
std::string ChatBody(int64_t seq, uint32_t max_tokens);

struct SlotLoad {
  int streams = 1;
  // Each slot starts a request whenever its previous one ended, until this long
  // after the start (so every slot makes at least one).
  absl::Duration run_for = absl::Seconds(3);
  // The slot's caller, made in the slot's own thread before the start.
  std::function<Caller(int slot)> open;
  // Runs on the calling thread about every 50 ms while the slots run.
  std::function<void()> tick;
  // Runs on the calling thread once every slot's caller is open, just before
  // the slots start: readings taken there leave the opening out.
  std::function<void()> on_start;
};

// Totals over every request of a SlotLoad.
struct SlotTotals {
  int64_t requests = 0;
  int64_t failed = 0;
  int64_t tokens = 0;
  double seconds = 0;           // Start -> the last request's end.
  std::vector<double> ttft_us;  // Request start -> its first token.
  std::string first_error;
  double tokens_per_second() const { return seconds > 0 ? tokens / seconds : 0; }
};
SlotTotals RunSlots(const SlotLoad& load);

}  // namespace bench
}  // namespace omnistage

#endif  // OMNISTAGE_TESTS_BENCH_GATEWAY_LOAD_H_
