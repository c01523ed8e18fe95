// prefix_benchmark: what routing by cache (docs/routing.md) saves on a
// multi-turn chat workload, and what the prefix-aware pick costs. Every
// policy runs in the same run, on fresh replicas; each figure per run and as
// the spread (min..max) over --runs runs. No targets, no verdicts: the ratios
// against round robin are printed, docs/benchmarks.md keeps them.
//
//   bazel run -c opt //tests/bench:prefix_benchmark -- --runs=2
//
//   multi-turn  --conversations at once, --turns each, over --replicas sim_llm
//               replicas with a prefix cache of --cache_blocks blocks and
//               --prefill_us_per_token: time to first output p50/p99, turns per
//               second, and the replicas' cache hit rate (their own counts),
//               for round_robin, least_loaded, session (round robin with a
//               session key per conversation), prefix_approximate and
//               prefix_precise (pick: prefix_aware, mode approximate / auto).
//   pick        the prefix-aware pick in this process (StagePool over fake
//               replicas): CPU per pick with --index_blocks blocks indexed over
//               4 replicas, for prompts of --pick_prompt_tokens tokens, with the
//               prompt's hashing and without; the index's memory per block.
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/prefix_blocks.h"
#include "orchestrator/routing/prefix_pick.h"
#include "orchestrator/routing/stage_pool.h"
#include "orchestrator/routing/testing/fake_replica_client.h"
#include "tests/bench/bench_processes.h"
#include "tests/bench/load_generator.h"
#include "tests/bench/multi_turn.h"

ABSL_FLAG(int, runs, 2, "times each policy runs; figures per run and as min..max");
ABSL_FLAG(std::string, policies,
          "round_robin,least_loaded,session,prefix_approximate,prefix_precise",
          "the policies of the multi-turn part");
ABSL_FLAG(int, replicas, 4, "sim_llm replicas");
ABSL_FLAG(int, conversations, 32, "conversations at once");
ABSL_FLAG(int, turns, 8, "turns per conversation");
ABSL_FLAG(int, think_ms, 300, "mean think time between a conversation's turns (exponential)");
ABSL_FLAG(int, system_tokens, 1000, "the shared system prompt's tokens");
ABSL_FLAG(int, context_tokens, 3000, "each conversation's own context (a document, tool output)");
ABSL_FLAG(int, message_tokens, 100, "tokens of each new message");
ABSL_FLAG(int, reply_tokens, 100, "tokens of the reply each turn adds to the history");
ABSL_FLAG(int, step_time_us, 5000, "the engine's decode step");
ABSL_FLAG(int, prefill_us_per_token, 20, "the engine's prefill cost per uncached token");
ABSL_FLAG(int, cache_blocks, 4000, "each replica's prefix cache, in blocks of 16 tokens");
ABSL_FLAG(int, index_blocks, 100000, "blocks indexed for the pick's cost");
ABSL_FLAG(int, pick_prompt_tokens, 2000, "the prompt of each timed pick");
ABSL_FLAG(std::string, scenarios, "multi-turn,pick", "which parts to run");

namespace omnistage {
namespace bench {
namespace {

using Series = std::vector<double>;

void MultiTurn() {
  const std::vector<std::string> policies =
      absl::StrSplit(absl::GetFlag(FLAGS_policies), ',', absl::SkipEmpty());
  std::map<std::string, std::map<std::string, Series>> figures;
  for (int run = 0; run < std::max(1, absl::GetFlag(FLAGS_runs)); ++run) {
    for (const std::string& policy : policies) {
      MultiTurnOptions options;
      options.policy = policy;
      options.replicas = absl::GetFlag(FLAGS_replicas);
      options.conversations = absl::GetFlag(FLAGS_conversations);
      options.turns = absl::GetFlag(FLAGS_turns);
      options.think_ms = absl::GetFlag(FLAGS_think_ms);
      options.system_tokens = absl::GetFlag(FLAGS_system_tokens);
      options.context_tokens = absl::GetFlag(FLAGS_context_tokens);
      options.message_tokens = absl::GetFlag(FLAGS_message_tokens);
      options.reply_tokens = absl::GetFlag(FLAGS_reply_tokens);
      options.step_time_us = absl::GetFlag(FLAGS_step_time_us);
      options.prefill_us_per_token = absl::GetFlag(FLAGS_prefill_us_per_token);
      options.cache_blocks = absl::GetFlag(FLAGS_cache_blocks);
      const MultiTurnFigures f = RunMultiTurn(options);
      std::cerr << "multi-turn run " << run + 1 << " " << policy
                << (f.ok ? " done" : " FAILED") << " (" << f.turns_done << " turns, "
                << f.turns_failed << " failed)\n";
      if (f.first_output_ms.empty()) continue;
      std::map<std::string, Series>& s = figures[policy];
      s["p50"].push_back(Percentile(f.first_output_ms, 50));
      s["p99"].push_back(Percentile(f.first_output_ms, 99));
      s["turns/s"].push_back(f.turns_done / std::max(f.seconds, 1e-9));
      const int64_t looked_up = f.hit_tokens + f.miss_tokens;
      s["hit %"].push_back(looked_up > 0 ? 100.0 * f.hit_tokens / looked_up : 0);
      s["failed"].push_back(f.turns_failed);
    }
  }
  std::cout << "# " << absl::GetFlag(FLAGS_conversations) << " conversations x "
            << absl::GetFlag(FLAGS_turns) << " turns (think " << absl::GetFlag(FLAGS_think_ms)
            << " ms on average) over " << absl::GetFlag(FLAGS_replicas)
            << " replicas; system prompt " << absl::GetFlag(FLAGS_system_tokens)
            << " tokens, a context of " << absl::GetFlag(FLAGS_context_tokens)
            << " tokens a conversation, +"
            << absl::GetFlag(FLAGS_message_tokens) + absl::GetFlag(FLAGS_reply_tokens)
            << " tokens of history a turn; cache " << absl::GetFlag(FLAGS_cache_blocks)
            << " blocks of 16 tokens a replica; prefill " << absl::GetFlag(FLAGS_prefill_us_per_token)
            << " us/token, decode step " << absl::GetFlag(FLAGS_step_time_us)
            << " us: per run, then (min..max)\n\n";
  for (const std::string& policy : policies) {
    std::map<std::string, Series>& s = figures[policy];
    std::cout << policy << ":\n"
              << "  first output p50 ms  " << Spread(s["p50"], 1) << "\n"
              << "  first output p99 ms  " << Spread(s["p99"], 1) << "\n"
              << "  turns per second     " << Spread(s["turns/s"], 2) << "\n"
              << "  cache hit %          " << Spread(s["hit %"], 1) << "\n"
              << "  failed turns         " << Spread(s["failed"], 0) << "\n";
  }
  std::cout << "\nround_robin / policy, same run (above 1: the policy is faster):\n";
  const Series& rr_p50 = figures["round_robin"]["p50"];
  const Series& rr_p99 = figures["round_robin"]["p99"];
  for (const std::string& policy : policies) {
    if (policy == "round_robin") continue;
    Series p50, p99;
    const Series& own50 = figures[policy]["p50"];
    const Series& own99 = figures[policy]["p99"];
    for (size_t i = 0; i < std::min(rr_p50.size(), own50.size()); ++i) {
      if (own50[i] > 0) p50.push_back(rr_p50[i] / own50[i]);
      if (own99[i] > 0) p99.push_back(rr_p99[i] / own99[i]);
    }
    std::cout << "  " << policy << ": first output p50 " << Spread(p50, 2) << ", p99 "
              << Spread(p99, 2) << "\n";
  }
  std::cout << "\n";
}

double CpuSeconds() {
  rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_utime.tv_sec + usage.ru_stime.tv_sec +
         (usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
}

// A conversation's text: 64 bytes (16 tokens) a block.
std::string Conversation(int c, int blocks) {
  std::string text;
  for (int b = 0; b < blocks; ++b) text += absl::StrFormat("%-63s|", absl::StrCat("c", c, "b", b));
  return text;
}

void PickCost() {
  const int index_blocks = absl::GetFlag(FLAGS_index_blocks);
  const int prompt_blocks = std::max(1, absl::GetFlag(FLAGS_pick_prompt_tokens) / 16);
  std::vector<std::string> log;
  std::vector<std::unique_ptr<FakeReplicaClient>> fakes;
  std::vector<ReplicaClient*> clients;
  for (int r = 0; r < 4; ++r) {
    fakes.push_back(std::make_unique<FakeReplicaClient>(absl::StrCat("r", r), &log));
    clients.push_back(fakes.back().get());
  }
  StagePool pool(0, clients);
  PrefixPickOptions prefix;
  prefix.index_blocks_per_replica = index_blocks;  // nothing capped away
  pool.set_pick(PickPolicy::kPrefixAware, prefix);
  v1::Ready ready;
  ready.set_capacity(1 << 20);  // load never decides
  for (int r = 0; r < 4; ++r) pool.Admit(r, ready);
  const absl::Time now = absl::Now();
  // Conversations of prompt_blocks blocks, routed until the index holds
  // index_blocks blocks.
  const int conversations = std::max(1, index_blocks / prompt_blocks);
  std::vector<google::protobuf::RepeatedPtrField<v1::Payload>> prompts(conversations);
  for (int c = 0; c < conversations; ++c) {
    prompts[c].Add()->mutable_text()->set_text(Conversation(c, prompt_blocks));
  }
  const int64_t rss_before = ReadRssKib(getpid()).value_or(0);
  for (int c = 0; c < conversations; ++c) {
    const std::string id = absl::StrCat("fill", c);
    pool.Pick(id, {"", &prompts[c], now}).IgnoreError();
    pool.Release(id);
  }
  int64_t indexed = 0;
  for (int r = 0; r < 4; ++r) indexed += pool.prefix_index().blocks(r);
  const int64_t rss_after = ReadRssKib(getpid()).value_or(0);
  // Timed: follow-up turns of random conversations (its history and 100
  // bytes more), whole picks through the pool.
  const int picks = 20000;
  std::vector<google::protobuf::RepeatedPtrField<v1::Payload>> asks(256);
  for (size_t i = 0; i < asks.size(); ++i) {
    asks[i].Add()->mutable_text()->set_text(
        Conversation(static_cast<int>((i * 7919) % conversations), prompt_blocks) +
        std::string(100, 'q'));
  }
  std::vector<std::string> ids(picks);
  for (int i = 0; i < picks; ++i) ids[i] = absl::StrCat("ask", i);
  const double cpu0 = CpuSeconds();
  for (int i = 0; i < picks; ++i) {
    pool.Pick(ids[i], {"", &asks[i % asks.size()], now}).IgnoreError();
    pool.Release(ids[i]);
  }
  const double whole_us = (CpuSeconds() - cpu0) / picks * 1e6;
  // The index alone: the same asks already hashed.
  std::vector<std::vector<uint64_t>> hashed;
  for (const auto& ask : asks) hashed.push_back(TextBlockHashes(ask.Get(0).text().text(), 16));
  const double cpu1 = CpuSeconds();
  int64_t matched = 0;
  for (int i = 0; i < picks; ++i) {
    for (int r = 0; r < 4; ++r) {
      matched += pool.prefix_index().Matched(r, hashed[i % hashed.size()], now);
    }
  }
  const double index_us = (CpuSeconds() - cpu1) / picks * 1e6;
  // Hashing alone.
  const double cpu2 = CpuSeconds();
  int64_t blocks = 0;
  for (int i = 0; i < picks; ++i) {
    blocks += TextBlockHashes(asks[i % asks.size()].Get(0).text().text(), 16).size();
  }
  const double hash_us = (CpuSeconds() - cpu2) / picks * 1e6;
  std::cout << "# the prefix-aware pick, 4 replicas, " << indexed << " blocks indexed ("
            << conversations << " prompts of " << prompt_blocks * 16 << " tokens), prompts of "
            << prompt_blocks * 16 + 25 << " tokens; CPU per pick, " << picks << " picks\n"
            << "  whole pick (hashing, index, cost, binding) us  "
            << absl::StrFormat("%.2f", whole_us) << "\n"
            << "  index lookups alone (4 replicas) us            "
            << absl::StrFormat("%.2f", index_us) << "\n"
            << "  hashing the prompt alone us                    "
            << absl::StrFormat("%.2f", hash_us) << "\n"
            << "  index memory, bytes per block (RSS)            "
            << absl::StrFormat("%.0f", indexed > 0 ? (rss_after - rss_before) * 1024.0 / indexed
                                                   : 0)
            << "\n  (checksums " << matched << " " << blocks << ")\n";
}

int Run(const std::string& /*dir*/) {
  const std::string scenarios = absl::GetFlag(FLAGS_scenarios);
  if (scenarios.find("multi-turn") != std::string::npos) MultiTurn();
  if (scenarios.find("pick") != std::string::npos) PickCost();
  return 0;
}

}  // namespace
}  // namespace bench
}  // namespace omnistage

int main(int argc, char** argv) {
  return omnistage::bench::RunInScratchDir(argc, argv, omnistage::bench::Run);
}
