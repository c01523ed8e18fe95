// The multi-turn workload of prefix_benchmark (docs/benchmarks.md, "Prefix-aware
// routing"): many conversations at once over one sim_llm stage of several
// replicas that model a prefix cache and its prefill cost; each turn sends a
// shared system prompt, the conversation's own context (a document, earlier
// tool output), the whole history and a new message, waits for the
// answer, and appends the message and a stand-in reply to the history (the
// simulated engine's words are not what a chat model would answer). Between
// turns a conversation thinks for a random time (exponential, mean think_ms,
// seeded per conversation; the first turn after a random share of one), as
// users do, so that conversations do not move in lockstep. Real processes on
// 127.0.0.1 (PipelineHarness), stopped by PID.
#ifndef OMNISTAGE_TESTS_BENCH_MULTI_TURN_H_
#define OMNISTAGE_TESTS_BENCH_MULTI_TURN_H_

#include <cstdint>
#include <string>
#include <vector>

namespace omnistage {
namespace bench {

struct MultiTurnOptions {
  // round_robin, least_loaded, session (round robin with a session key per
  // conversation), prefix_approximate or prefix_precise.
  std::string policy = "round_robin";
  int replicas = 4;
  int conversations = 32;
  int turns = 6;
  int system_tokens = 1000;
  int context_tokens = 3000;  // per conversation
  int message_tokens = 100;
  int reply_tokens = 100;  // the stand-in reply added to the history
  int output_tokens = 16;  // what the engine generates per turn
  int batch_size = 16;
  int step_time_us = 5000;
  int prefill_us_per_token = 20;
  int cache_blocks = 1500;  // per replica
  int block_tokens = 16;
  int think_ms = 300;
};

struct MultiTurnFigures {
  std::vector<double> first_output_ms;  // per turn: send -> first output
  double seconds = 0;                   // wall time of the whole workload
  int turns_done = 0;
  int turns_failed = 0;
  int64_t hit_tokens = 0;  // the replicas' own counts
  int64_t miss_tokens = 0;
  bool ok = false;
};

MultiTurnFigures RunMultiTurn(const MultiTurnOptions& options);

}  // namespace bench
}  // namespace omnistage

#endif  // OMNISTAGE_TESTS_BENCH_MULTI_TURN_H_
