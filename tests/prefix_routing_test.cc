// Routing by cache (docs/routing.md) as processes: sim_llm replicas that model
// a prefix cache (docs/engines.md), an orchestrator with pick: prefix_aware.
// - Approximate: a conversation's follow-up turn lands on the replica that
//   served its first turn, so its replica finds the first turn cached (the
//   replicas' own hit counts); round robin, the control, sends it elsewhere.
// - Precise: the orchestrator's index of each replica is what the worker
//   reports, also after the worker evicted blocks, and the pick matches what
//   is left (the deepest blocks went first), not what was sent there.
// - Session affinity: under round robin, a session's next request goes back to
//   its replica.
// - Several orchestrators sharing the workers: precise, each sees what the
//   others' requests left in the caches (a follow-up through another
//   orchestrator meets its prefix); approximate, each knows only its own.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "tests/failover_metrics.h"
#include "tests/orchestrator_cluster.h"
#include "tests/pipeline_harness.h"
#include "tests/pipeline_test_util.h"

namespace omnistage {
namespace {

constexpr int kBlockTokens = 4;  // 16 bytes of text a block

// `blocks` whole blocks of text unique to `name`.
std::string Text(const std::string& name, int blocks) {
  std::string text;
  for (int b = 0; b < blocks; ++b) {
    std::string block = absl::StrCat(name, "-", b, "-");
    block.resize(16, '.');
    text += block;
  }
  return text;
}

PipelineSpec Spec(const std::string& pick, const std::string& prefix, int cache_blocks) {
  StageSpec llm;
  llm.name = "llm";
  llm.replicas = 3;
  llm.final_output = true;
  llm.output_modality = "text";
  llm.engine_params = absl::StrCat("batch_size=8,step_time_us=1000,prefix_cache_blocks=",
                                   cache_blocks, ",block_tokens=", kBlockTokens);
  llm.pick = pick;
  llm.prefix = prefix;
  PipelineSpec spec;
  spec.stages = {llm};
  spec.orchestrator_flags.push_back("--metrics_listen=127.0.0.1:0");
  return spec;
}

void Turn(PipelineHarness& pipeline, const std::string& id, const std::string& prompt,
          const std::string& session = "") {
  v1::GenerateRequest request = MakeRequest(id, prompt, {StageParams(0, 2)});
  request.set_session_key(session);
  const GenerateResult result = pipeline.Generate(request);
  ASSERT_TRUE(result.status.ok()) << result.Summary();
  ASSERT_EQ(result.terminal.finish_reason(), v1::FINISH_REASON_LENGTH) << result.Summary();
}

int64_t HitTokens(PipelineHarness& pipeline) {
  int64_t hits = 0;
  for (const absl::StatusOr<WorkerStats>& stats : pipeline.Stats(0)) {
    EXPECT_TRUE(stats.ok()) << stats.status();
    if (stats.ok()) hits += stats->prefix_cache_hit_tokens;
  }
  return hits;
}

// omnistage_prefix_tokens_total{stage="llm",kind=`kind`} from the orchestrator.
int64_t PrefixTokens(PipelineHarness& pipeline, const std::string& kind) {
  absl::StatusOr<std::string> text = ScrapeMetrics(pipeline.orchestrator_metrics_port());
  EXPECT_TRUE(text.ok()) << text.status();
  const std::string series =
      absl::StrCat("omnistage_prefix_tokens_total{stage=\"llm\",kind=\"", kind, "\"} ");
  for (absl::string_view line : absl::StrSplit(text.value_or(""), '\n')) {
    if (!absl::ConsumePrefix(&line, series)) continue;
    double value = 0;
    if (absl::SimpleAtod(line, &value)) return static_cast<int64_t>(value);
  }
  return -1;
}

// Two conversations, two turns each, A1 B1 A2 B2; the hits their second turns
// found on the replicas.
int64_t SecondTurnHits(PipelineHarness& pipeline) {
  const std::string a = Text("alpha", 30), b = Text("bravo", 30);
  Turn(pipeline, "a1", a);
  Turn(pipeline, "b1", b);
  const int64_t before = HitTokens(pipeline);
  Turn(pipeline, "a2", a + Text("alpha-next", 5));
  Turn(pipeline, "b2", b + Text("bravo-next", 5));
  return HitTokens(pipeline) - before;
}

TEST(PrefixRoutingTest, FollowUpTurnsLandWhereTheirPrefixIs) {
  std::unique_ptr<PipelineHarness> pipeline =
      StartPipeline(Spec("prefix_aware", "{block_tokens: 4, mode: approximate}", 1000));
  ASSERT_NE(pipeline, nullptr);
  // Each second turn finds its first turn's 30 blocks where it goes.
  EXPECT_EQ(SecondTurnHits(*pipeline), 2 * 30 * kBlockTokens);
  EXPECT_EQ(PrefixTokens(*pipeline, "matched"), 2 * 30 * kBlockTokens);
}

TEST(PrefixRoutingTest, RoundRobinSendsFollowUpsElsewhere) {
  std::unique_ptr<PipelineHarness> pipeline = StartPipeline(Spec("round_robin", "", 1000));
  ASSERT_NE(pipeline, nullptr);
  // a1 -> 0, b1 -> 1, a2 -> 2, b2 -> 0: nothing cached where they go.
  EXPECT_EQ(SecondTurnHits(*pipeline), 0);
}

TEST(PrefixRoutingTest, ASessionGoesBackToItsReplicaUnderRoundRobin) {
  std::unique_ptr<PipelineHarness> pipeline = StartPipeline(Spec("round_robin", "", 1000));
  ASSERT_NE(pipeline, nullptr);
  const std::string a = Text("alpha", 30), b = Text("bravo", 30);
  Turn(*pipeline, "a1", a, "session-a");
  Turn(*pipeline, "b1", b, "session-b");
  Turn(*pipeline, "a2", a + Text("alpha-next", 5), "session-a");
  Turn(*pipeline, "b2", b + Text("bravo-next", 5), "session-b");
  EXPECT_EQ(HitTokens(*pipeline), 2 * 30 * kBlockTokens);
}

TEST(PrefixRoutingTest, ThePreciseIndexFollowsTheWorkersEvictions) {
  // 20 blocks a replica: a second prompt of 15 on a replica evicts 10.
  std::unique_ptr<PipelineHarness> pipeline =
      StartPipeline(Spec("prefix_aware", "{block_tokens: 4}", 20));
  ASSERT_NE(pipeline, nullptr);
  // Distinct prompts one after another: with nothing to match and no load,
  // they go round in turn, so after 4 the first replica served two.
  const std::string first = Text("first", 15);
  for (int i = 0; i < 4; ++i) {
    Turn(*pipeline, absl::StrCat("p", i), i == 0 ? first : Text(absl::StrCat("other", i), 15));
  }
  // The orchestrator's index of each replica is what its worker holds.
  std::vector<int64_t> held;
  ASSERT_TRUE(Eventually(
      [&] {
        absl::StatusOr<v1::PipelineStatus> status = pipeline->Status();
        if (!status.ok()) return false;
        held.clear();
        bool same = true;
        const std::vector<absl::StatusOr<WorkerStats>> stats = pipeline->Stats(0);
        for (int r = 0; r < 3; ++r) {
          const v1::ReplicaStatus& replica = status->stages(0).replicas(r);
          if (!stats[r].ok() || replica.prefix_index() != "precise") return false;
          held.push_back(stats[r]->prefix_cache_blocks);
          same = same && replica.prefix_blocks() == stats[r]->prefix_cache_blocks;
        }
        return same;
      },
      absl::Seconds(10)));
  EXPECT_EQ(held, (std::vector<int64_t>{20, 15, 15}));
  // The first prompt's deepest 10 blocks were evicted: its follow-up matches
  // the 5 that are left (approximate would have matched all 15).
  const int64_t matched = PrefixTokens(*pipeline, "matched");
  Turn(*pipeline, "p0-next", first + Text("next", 3));
  EXPECT_EQ(PrefixTokens(*pipeline, "matched") - matched, 5 * kBlockTokens);
}

// Blocks orchestrator `via` lists for each replica of stage 0.
std::vector<int64_t> IndexedBlocks(OrchestratorCluster& cluster, int via) {
  std::vector<int64_t> blocks;
  absl::StatusOr<v1::PipelineStatus> status = cluster.Status(via);
  if (!status.ok()) return blocks;
  for (const v1::ReplicaStatus& replica : status->stages(0).replicas()) {
    blocks.push_back(replica.prefix_blocks());
  }
  return blocks;
}

void ClusterTurn(OrchestratorCluster& cluster, int via, const std::string& id,
                 const std::string& prompt) {
  const GenerateResult result =
      cluster.StartGenerate(via, MakeRequest(id, prompt, {StageParams(0, 2)}))
          ->Wait(absl::Seconds(30));
  ASSERT_TRUE(result.status.ok()) << result.Summary();
}

TEST(PrefixRoutingTest, PreciseOrchestratorsSeeTheSameCaches) {
  absl::StatusOr<std::unique_ptr<OrchestratorCluster>> cluster =
      OrchestratorCluster::Start(Spec("prefix_aware", "{block_tokens: 4}", 1000), 2);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  const std::string a = Text("alpha", 30);
  ClusterTurn(**cluster, 0, "a1", a);
  // Orchestrator 1 sent nothing, yet lists the 30 blocks where they are.
  std::vector<int64_t> seen_by_1;
  EXPECT_TRUE(Eventually(
      [&] {
        seen_by_1 = IndexedBlocks(**cluster, 1);
        return seen_by_1 == IndexedBlocks(**cluster, 0) &&
               std::count(seen_by_1.begin(), seen_by_1.end(), 30) == 1;
      },
      absl::Seconds(10)))
      << "orchestrator 1 lists " << testing::PrintToString(seen_by_1);
  // The follow-up through orchestrator 1 meets its prefix.
  const int64_t before = HitTokens((*cluster)->pipeline());
  ClusterTurn(**cluster, 1, "a2", a + Text("alpha-next", 5));
  EXPECT_EQ(HitTokens((*cluster)->pipeline()) - before, 30 * kBlockTokens);
}

TEST(PrefixRoutingTest, ApproximateOrchestratorsKnowOnlyTheirOwn) {
  absl::StatusOr<std::unique_ptr<OrchestratorCluster>> cluster = OrchestratorCluster::Start(
      Spec("prefix_aware", "{block_tokens: 4, mode: approximate}", 1000), 2);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  ClusterTurn(**cluster, 0, "a1", Text("alpha", 30));
  const std::vector<int64_t> by_0 = IndexedBlocks(**cluster, 0);
  EXPECT_EQ(std::count(by_0.begin(), by_0.end(), 30), 1);
  EXPECT_EQ(IndexedBlocks(**cluster, 1), (std::vector<int64_t>{0, 0, 0}));
}

}  // namespace
}  // namespace omnistage
