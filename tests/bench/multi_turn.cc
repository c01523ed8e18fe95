#include "tests/bench/multi_turn.h"

#include <algorithm>
#include <iostream>
#include <memory>
#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "tests/pipeline_harness.h"

namespace omnistage {
namespace bench {
namespace {

// About `tokens` tokens (4 bytes each) of words that differ with `seed`.
std::string Words(uint64_t seed, int tokens) {
  std::string text;
  uint64_t x = seed * 0x9e3779b97f4a7c15ULL + 1;
  while (static_cast<int>(text.size()) < tokens * 4) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    absl::StrAppend(&text, "w", x % 100000, " ");
  }
  text.resize(tokens * 4);
  return text;
}

PipelineSpec Spec(const MultiTurnOptions& options) {
  StageSpec llm;
  llm.name = "llm";
  llm.engine = "sim_llm";
  llm.replicas = options.replicas;
  llm.final_output = true;
  llm.output_modality = "text";
  llm.engine_params =
      absl::StrCat("batch_size=", options.batch_size, ",step_time_us=", options.step_time_us,
                   ",prefix_cache_blocks=", options.cache_blocks,
                   ",block_tokens=", options.block_tokens,
                   ",prefill_us_per_token=", options.prefill_us_per_token);
  if (options.policy == "least_loaded") llm.pick = "least_loaded";
  if (options.policy == "prefix_approximate" || options.policy == "prefix_precise") {
    llm.pick = "prefix_aware";
    llm.prefix = absl::StrCat("{block_tokens: ", options.block_tokens, ", mode: ",
                              options.policy == "prefix_precise" ? "auto" : "approximate", "}");
  }
  PipelineSpec spec;
  spec.name = "multi-turn";
  spec.stages = {llm};
  // A busy worker must not look dead.
  spec.keepalive_ms = 2000;
  spec.keepalive_timeout_ms = 10000;
  spec.request_idle_timeout_ms = 120000;
  spec.limits = {"max_in_flight: 10000"};
  return spec;
}

}  // namespace

MultiTurnFigures RunMultiTurn(const MultiTurnOptions& options) {
  MultiTurnFigures figures;
  absl::StatusOr<std::unique_ptr<PipelineHarness>> started = PipelineHarness::Start(Spec(options));
  if (!started.ok()) {
    std::cerr << "multi-turn: " << started.status() << "\n";
    return figures;
  }
  PipelineHarness& pipeline = **started;
  const std::string system = Words(0, options.system_tokens);
  absl::Mutex mu;
  const bool sessions = options.policy == "session";
  const absl::Time start = absl::Now();
  std::vector<std::thread> conversations;
  for (int c = 0; c < options.conversations; ++c) {
    conversations.emplace_back([&, c] {
      std::mt19937_64 random(static_cast<uint64_t>(c) + 1);
      std::exponential_distribution<double> think(1.0 / std::max(options.think_ms, 1));
      absl::SleepFor(absl::Milliseconds(
          std::uniform_real_distribution<double>(0, options.think_ms)(random)));
      std::string history = Words(2000000 + c, options.context_tokens);
      for (int t = 0; t < options.turns; ++t) {
        if (t > 0) absl::SleepFor(absl::Milliseconds(think(random)));
        const std::string message = Words(1000 + 100 * c + t, options.message_tokens);
        v1::GenerateRequest request =
            MakeRequest(absl::StrCat("c", c, "-t", t), system + history + message,
                        {StageParams(0, options.output_tokens)});
        if (sessions) request.set_session_key(absl::StrCat("conversation-", c));
        const absl::Time sent = absl::Now();
        std::unique_ptr<GenerateCall> call = pipeline.StartGenerate(request, absl::Seconds(300));
        const bool output = call->WaitForOutput(absl::Seconds(300));
        const double first_ms = absl::ToDoubleMilliseconds(absl::Now() - sent);
        const GenerateResult result = call->Wait(absl::Seconds(300));
        const bool ok = output && result.status.ok() &&
                        result.terminal.finish_reason() != v1::FINISH_REASON_ERROR;
        {
          absl::MutexLock lock(&mu);
          if (ok) {
            figures.first_output_ms.push_back(first_ms);
            ++figures.turns_done;
          } else {
            ++figures.turns_failed;
          }
        }
        history += message + Words(500000 + 100 * c + t, options.reply_tokens);
      }
    });
  }
  for (std::thread& conversation : conversations) conversation.join();
  figures.seconds = absl::ToDoubleSeconds(absl::Now() - start);
  for (const absl::StatusOr<WorkerStats>& stats : pipeline.Stats(0)) {
    if (!stats.ok()) continue;
    figures.hit_tokens += stats->prefix_cache_hit_tokens;
    figures.miss_tokens += stats->prefix_cache_miss_tokens;
  }
  figures.ok = figures.turns_failed == 0;
  return figures;
}

}  // namespace bench
}  // namespace omnistage
