// For the stage worker's benchmark programs: runs `batch` requests of `tokens`
// tokens each through a real Worker and one gRPC session on loopback, and
// measures it.
//
//   SessionRun run = RunThroughWorker("sim_llm", {{"batch_size", "64"}}, 64, 2000);
//   std::printf("%.0f tokens/s\n", run.tokens / run.seconds);
#ifndef OMNISTAGE_TESTS_BENCH_WORKER_SESSION_BENCH_H_
#define OMNISTAGE_TESTS_BENCH_WORKER_SESSION_BENCH_H_

#include <cstdint>
#include <map>
#include <string>

namespace omnistage {

struct SessionRun {
  uint64_t tokens = 0;    // received by the client
  uint64_t messages = 0;  // session events received
  uint64_t steps = 0;     // engine steps taken meanwhile
  double seconds = 0;     // from the first Add to the last request's end
};

// Engine `engine` made with `params` (CreateEngine); prompts "prompt <i>".
SessionRun RunThroughWorker(const std::string& engine,
                            const std::map<std::string, std::string>& params, int batch,
                            uint32_t tokens);

}  // namespace omnistage

#endif  // OMNISTAGE_TESTS_BENCH_WORKER_SESSION_BENCH_H_
