// A worker's reports of its engine's prefix cache (docs/engines.md, "Prefix
// cache"): Ready.prefix_cache; for a session that asked (Hello.want_cache_events)
// a snapshot in its Ready and then every change with the step events, even
// when it had no output, and a snapshot again when it fell too far behind;
// nothing for a session that did not ask, nor from an engine without a cache;
// the cache's metrics.
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/prefix_blocks.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "stage_worker/testing/worker_service_harness.h"

namespace omnistage {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::UnorderedElementsAreArray;

// 64 bytes: 16 tokens, 4 blocks of 4 tokens.
constexpr char kPrompt[] = "You are a helpful assistant: answer in one short sentence please";
constexpr char kOtherPrompt[] = "Translate the text that follows into French, keeping its tone!!!";

std::set<uint64_t> Blocks(const std::string& prompt, int block_tokens = 4) {
  std::vector<uint64_t> blocks = TextBlockHashes(prompt, block_tokens);
  return {blocks.begin(), blocks.end()};
}

// What one session has been told of the cache.
struct Known {
  // Applies a report, as a client would.
  void Apply(const v1::CacheEvents& cache) {
    ++reports;
    if (cache.snapshot()) {
      ++snapshots;
      held.clear();
    }
    for (uint64_t block : cache.stored()) {
      held.insert(block);
      last[block] = true;
    }
    for (uint64_t block : cache.evicted()) {
      held.erase(block);
      last[block] = false;
    }
  }

  std::set<uint64_t> held;
  std::map<uint64_t, bool> last;  // each block's last report: stored or evicted
  int reports = 0;
  int snapshots = 0;
  int events_with_cache = 0;
  int load = -1;  // the last WorkerLoad.requests
  std::set<std::string> finished;
};

class WorkerCacheTest : public WorkerServiceTest {
 protected:
  // sim_llm with a cache of `capacity` blocks of `block_tokens` tokens.
  void StartCached(int capacity, int block_tokens = 4) {
    StartWorkerWith("sim_llm", {{"prefix_cache_blocks", std::to_string(capacity)},
                                {"block_tokens", std::to_string(block_tokens)}});
  }

  // A session whose Hello says `want_cache_events`; what its Ready said is in
  // `known` (if it carried a report) and `ready`.
  std::unique_ptr<WorkerTestClient> Connect(bool want_cache_events, Known* known,
                                            v1::Ready* ready = nullptr) {
    auto client = std::make_unique<WorkerTestClient>(channel_);
    v1::Hello hello;
    hello.set_protocol_version(1);
    hello.set_want_cache_events(want_cache_events);
    absl::StatusOr<v1::Ready> got = client->Connect(hello);
    EXPECT_TRUE(got.ok()) << got.status();
    if (!got.ok()) return client;
    if (got->load().has_cache()) known->Apply(got->load().cache());
    if (ready != nullptr) *ready = *got;
    return client;
  }

  // Reads `client`'s events into `known` until `done` holds (true) or 10 s pass.
  static bool Follow(WorkerTestClient& client, Known* known,
                     const std::function<bool(const Known&)>& done) {
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    while (!done(*known)) {
      std::optional<v1::WorkerEvent> event = client.Next(deadline - absl::Now());
      if (!event.has_value()) return false;
      if (!event->has_step()) continue;
      if (event->step().has_load()) known->load = event->step().load().requests();
      if (event->step().load().has_cache()) {
        ++known->events_with_cache;
        known->Apply(event->step().load().cache());
      }
      for (const v1::RequestOutput& output : event->step().outputs()) {
        if (output.finished()) known->finished.insert(output.request_id());
      }
    }
    return true;
  }

  // Runs request `id` with `prompt` on `client` to its end, reading its events
  // into `known`.
  static void Run(WorkerTestClient& client, Known* known, const std::string& id,
                  const std::string& prompt) {
    client.Add(id, prompt, /*max_tokens=*/3);
    ASSERT_TRUE(Follow(client, known, [&](const Known& k) { return k.finished.count(id) > 0; }))
        << id << " did not finish";
  }

  static std::function<bool(const Known&)> Holds(std::set<uint64_t> blocks) {
    return [blocks](const Known& k) { return k.held == blocks; };
  }
};

TEST_F(WorkerCacheTest, ReadyCarriesTheCacheAndASnapshotOnlyWhenAsked) {
  StartCached(/*capacity=*/64);
  Known plain_known;
  v1::Ready ready;
  auto plain = Connect(false, &plain_known, &ready);
  EXPECT_EQ(ready.prefix_cache().block_tokens(), 4);
  EXPECT_EQ(ready.prefix_cache().capacity_blocks(), 64);
  EXPECT_FALSE(ready.load().has_cache());

  Known asking_known;
  auto asking = Connect(true, &asking_known, &ready);
  ASSERT_TRUE(ready.load().has_cache());
  EXPECT_TRUE(ready.load().cache().snapshot());
  EXPECT_THAT(ready.load().cache().stored(), IsEmpty());

  Run(*plain, &plain_known, "r", kPrompt);
  Known late_known;
  auto late = Connect(true, &late_known, &ready);
  EXPECT_TRUE(ready.load().cache().snapshot());
  EXPECT_THAT(ready.load().cache().stored(), UnorderedElementsAreArray(Blocks(kPrompt)));
  EXPECT_THAT(ready.load().cache().evicted(), IsEmpty());
}

// The blocks a request stores reach every session that asked, the one that
// ran it with its outputs and another one that had no output at all; a
// session that did not ask sees no cache field in any event.
TEST_F(WorkerCacheTest, StoredBlocksReachTheSessionsThatAsked) {
  StartCached(64);
  Known runner, watcher, plain_known;
  auto running = Connect(true, &runner);
  auto watching = Connect(true, &watcher);
  auto plain = Connect(false, &plain_known);
  Run(*running, &runner, "r", kPrompt);
  EXPECT_TRUE(Follow(*running, &runner, Holds(Blocks(kPrompt))));
  EXPECT_TRUE(Follow(*watching, &watcher, Holds(Blocks(kPrompt))));
  EXPECT_GE(watcher.events_with_cache, 1);

  Run(*plain, &plain_known, "p", kOtherPrompt);
  std::set<uint64_t> both = Blocks(kPrompt);
  for (uint64_t block : Blocks(kOtherPrompt)) both.insert(block);
  EXPECT_TRUE(Follow(*watching, &watcher, Holds(both)));
  // The plain session's events: its outputs and load changes, never the cache.
  Run(*plain, &plain_known, "q", kPrompt);
  for (const v1::WorkerEvent& event :
       plain->EventsUntilEnd(absl::Seconds(10), absl::Milliseconds(200))) {
    EXPECT_FALSE(event.step().load().has_cache());
  }
  EXPECT_EQ(plain_known.reports, 0);
}

// Changes reach an asking session in a step where nothing else would: it has
// no output, and the worker's load did not change.
TEST_F(WorkerCacheTest, ChangesAloneMakeAnEvent) {
  StartWorkerWith("sim_llm", {{"prefix_cache_blocks", "64"},
                              {"block_tokens", "4"},
                              {"step_time_us", "1000"}});
  Known watcher, plain_known;
  auto watching = Connect(true, &watcher);
  auto plain = Connect(false, &plain_known);
  plain->Add("busy", "x", /*max_tokens=*/1000000);
  ASSERT_TRUE(Follow(*watching, &watcher, [](const Known& k) { return k.load == 1; }));
  // Added, but not prefilled before its input is complete.
  plain->Add("r", kPrompt, /*max_tokens=*/1000000, /*input_complete=*/false);
  ASSERT_TRUE(Follow(*watching, &watcher, [](const Known& k) { return k.load == 2; }));
  EXPECT_THAT(watcher.held, IsEmpty());
  v1::WorkerCommand last;
  last.mutable_append_input()->set_request_id("r");
  last.mutable_append_input()->set_last(true);
  plain->Send(last);
  EXPECT_TRUE(Follow(*watching, &watcher, Holds(Blocks(kPrompt))));
  EXPECT_EQ(watcher.load, 2);
}

TEST_F(WorkerCacheTest, EvictionsArriveAsEvictedBlocks) {
  StartCached(/*capacity=*/4);
  Known known;
  auto client = Connect(true, &known);
  Run(*client, &known, "first", kPrompt);
  ASSERT_TRUE(Follow(*client, &known, Holds(Blocks(kPrompt))));
  Run(*client, &known, "second", kOtherPrompt);
  EXPECT_TRUE(Follow(*client, &known, Holds(Blocks(kOtherPrompt))));
  for (uint64_t block : Blocks(kPrompt)) EXPECT_FALSE(known.last[block]) << block;
  EXPECT_EQ(known.snapshots, 1);  // Ready's
}

// A step that changes more blocks than a session may have pending (4 times
// the capacity, at least 1024) sends that session a snapshot instead.
TEST_F(WorkerCacheTest, ASessionTooFarBehindGetsASnapshot) {
  StartCached(/*capacity=*/16, /*block_tokens=*/1);
  Known runner, watcher;
  auto running = Connect(true, &runner);
  auto watching = Connect(true, &watcher);
  std::string prompt;
  for (int i = 0; prompt.size() < 4 * 1100; ++i) prompt += absl::StrCat(i % 10);
  const std::vector<uint64_t> blocks = TextBlockHashes(prompt, 1);
  ASSERT_EQ(blocks.size(), 1100u);
  // A run longer than the cache keeps its head (stored deepest first).
  const std::set<uint64_t> head(blocks.begin(), blocks.begin() + 16);
  Run(*running, &runner, "long", prompt);
  EXPECT_TRUE(Follow(*running, &runner, Holds(head)));
  EXPECT_TRUE(Follow(*watching, &watcher, Holds(head)));
  EXPECT_EQ(watcher.snapshots, 2);  // Ready's, then the one for the step
  EXPECT_EQ(watcher.events_with_cache, 1);
  EXPECT_EQ(runner.snapshots, 2);
}

TEST_F(WorkerCacheTest, MetricsShowHitsAndMisses) {
  StartCached(64);
  Known known;
  auto client = Connect(false, &known);
  Run(*client, &known, "cold", kPrompt);
  Run(*client, &known, "warm", kPrompt);
  const std::string metrics = worker_->metrics_registry().Render();
  EXPECT_THAT(metrics, HasSubstr("\nomnistage_worker_prefix_cache_blocks 4\n"));
  EXPECT_THAT(metrics, HasSubstr("\nomnistage_worker_prefix_cache_capacity_blocks 64\n"));
  EXPECT_THAT(metrics,
              HasSubstr("\nomnistage_worker_prefix_cache_tokens_total{result=\"hit\"} 16\n"));
  EXPECT_THAT(metrics,
              HasSubstr("\nomnistage_worker_prefix_cache_tokens_total{result=\"miss\"} 16\n"));
}

// Without a cache (the default), Ready says none, an asking session gets no
// snapshot, and the metrics have no cache family.
TEST_F(WorkerCacheTest, AnEngineWithoutACacheReportsNone) {
  StartWorkerWith("sim_llm", {});
  Known known;
  v1::Ready ready;
  auto client = Connect(true, &known, &ready);
  EXPECT_FALSE(ready.has_prefix_cache());
  EXPECT_FALSE(ready.load().has_cache());
  Run(*client, &known, "r", kPrompt);
  EXPECT_EQ(known.reports, 0);
  EXPECT_THAT(worker_->metrics_registry().Render(), Not(HasSubstr("prefix_cache")));
}

}  // namespace
}  // namespace omnistage
