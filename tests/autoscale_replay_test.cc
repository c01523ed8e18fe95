// What an autoscaler does with the stages' signal, replayed against real
// processes: two stages whose replicas come from DNS (dnsmasq; each replica a
// stage_worker on its own loopback address, like the pods of a headless
// Service), an open-loop load that ramps up, holds and falls, and every
// second the HorizontalPodAutoscaler's algorithm (hpa_replay.h) on each
// stage's omnistage_stage_demand_replicas from the orchestrator's /metrics,
// as KEDA's Prometheus trigger feeds it (deploy/kubernetes/overlays/keda).
// A new replica is a new process put in DNS; a removed one leaves DNS and
// gets SIGTERM (it drains), as a Deployment's scale-down does.
//
// A request holds a slot three times longer on the second stage than on the
// first, so the second must end up with about three times the first's
// demand. Checked: both stages grow, in that ratio; the counts settle while
// the load holds (no change in its last ten seconds) and never go back up
// after going down; when the load falls both shrink back to one replica;
// and no request fails on the way.
#include <signal.h>

#include <atomic>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "orchestrator/discovery/testing/dns_server.h"
#include "tests/generate_call.h"
#include "tests/hpa_replay.h"
#include "tests/metrics_scrape.h"
#include "tests/pipeline_harness.h"
#include "tests/pipeline_test_util.h"

namespace omnistage {
namespace {

constexpr int kStages = 2;
const char* const kNames[kStages] = {"first", "second"};
// 25 ms steps, 4 requests a step per replica: 12 steps on the first stage,
// 36 on the second.
const char* const kParams[kStages] = {"batch_size=4,step_time_us=25000,max_tokens=12",
                                      "batch_size=4,step_time_us=25000,max_tokens=36"};
constexpr int kOutputTokens = 36;

// Requests per second `t` into the run: 2, ramping to 16 over 8 s, holding
// until 46 s, then 2 again.
constexpr absl::Duration kHoldEnds = absl::Seconds(46);
constexpr absl::Duration kRunEnds = absl::Seconds(80);
double RateAt(absl::Duration t) {
  const double s = absl::ToDoubleSeconds(t);
  if (s < 8) return 2;
  if (s < 16) return 2 + (s - 8) / 8 * 14;
  if (s < absl::ToDoubleSeconds(kHoldEnds)) return 16;
  return 2;
}

// The value of `name`{stage="<stage>"} in a Prometheus text scrape; -1 when
// absent.
double MetricOf(const std::string& text, const std::string& name, const std::string& stage) {
  const std::string head = absl::StrCat(name, "{stage=\"", stage, "\"} ");
  const size_t at = text.find(head);
  if (at == std::string::npos) return -1;
  const size_t end = text.find('\n', at);
  double value = -1;
  if (!absl::SimpleAtod(text.substr(at + head.size(), end - at - head.size()), &value)) return -1;
  return value;
}

// Requests sent at RateAt(t), each on its own call, whatever the pipeline
// answers (an open loop: clients do not wait for each other).
class OpenLoad {
 public:
  explicit OpenLoad(std::shared_ptr<v1::Orchestrator::Stub> stub) : stub_(std::move(stub)) {}
  ~OpenLoad() { Stop(); }

  void Start() {
    start_ = absl::Now();
    thread_ = std::thread([this] { Run(); });
  }
  void Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  absl::Duration elapsed() const { return absl::Now() - start_; }
  // Stops sending and waits for every call.
  std::vector<GenerateResult> Finish() {
    Stop();
    std::vector<GenerateResult> results;
    for (auto& call : calls_) results.push_back(call->Wait(absl::Seconds(60)));
    return results;
  }

 private:
  void Run() {
    double owed = 0;
    absl::Time last = absl::Now();
    while (!stop_) {
      absl::SleepFor(absl::Milliseconds(10));
      const absl::Time now = absl::Now();
      owed += RateAt(now - start_) * absl::ToDoubleSeconds(now - last);
      last = now;
      for (; owed >= 1; owed -= 1) {
        calls_.push_back(std::make_unique<GenerateCall>(
            stub_, MakeRequest(absl::StrCat("load-", calls_.size()), "hello"),
            absl::Seconds(60)));
      }
    }
  }

  const std::shared_ptr<v1::Orchestrator::Stub> stub_;
  absl::Time start_;
  std::atomic<bool> stop_{false};
  // Only the sending thread touches it until Finish() has joined it.
  std::vector<std::unique_ptr<GenerateCall>> calls_;
  std::thread thread_;
};

class AutoscaleReplayTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<DnsServer>> dns = DnsServer::Start();
    ASSERT_TRUE(dns.ok()) << dns.status();
    dns_ = *std::move(dns);
    PipelineSpec spec;
    spec.name = "autoscale";
    spec.dns_server = dns_->address();
    spec.scaling = "{window_ms: 3000, sample_ms: 250}";
    spec.orchestrator_flags = {"--metrics_listen=127.0.0.1:0"};
    for (int s = 0; s < kStages; ++s) {
      const std::string host = HostFor(s);
      StageSpec stage = Stage(kNames[s], "sim_llm", kParams[s], 1, s == kStages - 1, "tokens");
      stage.worker_flags = {"--drain_timeout_ms=20000"};
      stage.hosts = {host};
      stage.dns_name = DnsName(s);
      stage.refresh_ms = 200;
      spec.stages.push_back(stage);
      ASSERT_TRUE(dns_->Set(DnsName(s), {host}).ok());
      in_dns_[s] = {{host, 0}};
    }
    pipeline_ = StartPipeline(spec);
    ASSERT_NE(pipeline_, nullptr);
  }

  void TearDown() override {
    // Replicas scaled away were sent SIGTERM; each drains and exits 0.
    for (const auto& [stage, replica] : leaving_) {
      EXPECT_EQ(pipeline_->worker_process(stage, replica)->Wait(absl::Seconds(30)), 0)
          << kNames[stage] << " replica " << replica << " did not drain and exit 0";
    }
  }

  static std::string DnsName(int stage) { return absl::StrCat(kNames[stage], ".omni.test"); }
  std::string HostFor(int stage) { return absl::StrCat("127.0.", stage + 1, ".", ++hosts_made_); }

  int replicas(int stage) const { return static_cast<int>(in_dns_[stage].size()); }

  // Scales `stage` to `count` replicas as a Deployment would.
  void ScaleTo(int stage, int count) {
    std::vector<std::pair<std::string, int>>& listed = in_dns_[stage];
    while (replicas(stage) < count) {
      const std::string host = HostFor(stage);
      absl::StatusOr<int> replica = pipeline_->AddWorker(stage, host);
      ASSERT_TRUE(replica.ok()) << replica.status();
      listed.emplace_back(host, *replica);
    }
    std::vector<int> gone;
    while (replicas(stage) > count) {
      gone.push_back(listed.back().second);
      listed.pop_back();
    }
    std::vector<std::string> hosts;
    for (const auto& [host, replica] : listed) hosts.push_back(host);
    ASSERT_TRUE(dns_->Set(DnsName(stage), hosts).ok());
    for (int replica : gone) {
      pipeline_->worker_process(stage, replica)->Signal(SIGTERM);
      leaving_.emplace_back(stage, replica);
    }
  }

  std::unique_ptr<DnsServer> dns_;
  std::unique_ptr<PipelineHarness> pipeline_;
  int hosts_made_ = 1;
  // Per stage, what DNS lists: (host, the harness's replica index).
  std::vector<std::pair<std::string, int>> in_dns_[kStages];
  std::vector<std::pair<int, int>> leaving_;
};

TEST_F(AutoscaleReplayTest, StagesGrowInTheirRatioSettleAndShrinkWithNoFailedRequest) {
  HpaOptions options;
  options.down_stabilization = absl::Seconds(8);
  HpaReplay hpa[kStages] = {HpaReplay(options), HpaReplay(options)};
  // Per stage, every decision (seconds into the run, replicas).
  std::vector<std::pair<double, int>> history[kStages];
  double demand_at_peak[kStages] = {0, 0};
  int replicas_at_peak[kStages] = {0, 0};

  OpenLoad load(pipeline_->stub());
  load.Start();
  while (load.elapsed() < kRunEnds) {
    absl::SleepFor(absl::Seconds(1));
    const double t = absl::ToDoubleSeconds(load.elapsed());
    const std::string scrape = Scrape(pipeline_->orchestrator_metrics_port());
    for (int s = 0; s < kStages; ++s) {
      const double demand = MetricOf(scrape, "omnistage_stage_demand_replicas", kNames[s]);
      ASSERT_GE(demand, 0) << "no omnistage_stage_demand_replicas for " << kNames[s];
      const int next = hpa[s].Decide(absl::Now(), replicas(s), demand);
      if (next != replicas(s)) {
        std::cout << "t=" << static_cast<int>(t) << "s " << kNames[s] << ": " << replicas(s)
                  << " -> " << next << " (demand " << demand << ")" << std::endl;
        ScaleTo(s, next);
      }
      history[s].emplace_back(t, replicas(s));
      if (load.elapsed() < kHoldEnds) {
        demand_at_peak[s] = demand;
        replicas_at_peak[s] = replicas(s);
      }
    }
  }
  const std::vector<GenerateResult> results = load.Finish();

  // No request failed, scaling up or down.
  int failed = 0;
  for (const GenerateResult& r : results) {
    ExpectOneTerminal(r);
    if (r.terminal.finish_reason() != v1::FINISH_REASON_LENGTH ||
        r.tokens.size() != kOutputTokens) {
      if (++failed <= 5) ADD_FAILURE() << r.request_id << ": " << r.Summary();
    }
  }
  EXPECT_EQ(failed, 0) << "of " << results.size();
  EXPECT_GT(results.size(), 400u) << "too little load to mean anything";

  // They grew in the ratio of their slot times.
  std::cout << "at the peak: demand " << demand_at_peak[0] << " and " << demand_at_peak[1]
            << ", replicas " << replicas_at_peak[0] << " and " << replicas_at_peak[1] << std::endl;
  EXPECT_GE(replicas_at_peak[0], 2);
  EXPECT_GE(replicas_at_peak[1], 4);
  const double demand_ratio = demand_at_peak[1] / demand_at_peak[0];
  EXPECT_GT(demand_ratio, 2.4);
  EXPECT_LT(demand_ratio, 3.6);
  const double replica_ratio = static_cast<double>(replicas_at_peak[1]) / replicas_at_peak[0];
  EXPECT_GE(replica_ratio, 2);
  EXPECT_LE(replica_ratio, 3.5);

  for (int s = 0; s < kStages; ++s) {
    std::vector<std::string> counts;
    for (const auto& [t, count] : history[s]) counts.push_back(absl::StrCat(count));
    const std::string seen = absl::StrJoin(counts, " ");
    std::cout << kNames[s] << " replicas, second by second: " << seen << std::endl;
    // Settled: no change in the last 10 s of the hold.
    for (const auto& [t, count] : history[s]) {
      if (t > absl::ToDoubleSeconds(kHoldEnds) - 10 && t < absl::ToDoubleSeconds(kHoldEnds)) {
        EXPECT_EQ(count, replicas_at_peak[s]) << kNames[s] << " at t=" << t << ": " << seen;
      }
    }
    // No flapping: once it went down it never went back up.
    bool went_down = false;
    for (size_t i = 1; i < history[s].size(); ++i) {
      if (history[s][i].second < history[s][i - 1].second) went_down = true;
      EXPECT_FALSE(went_down && history[s][i].second > history[s][i - 1].second)
          << kNames[s] << " went back up at t=" << history[s][i].first << ": " << seen;
    }
    // Back to one when the load fell.
    EXPECT_EQ(replicas(s), 1) << kNames[s] << ": " << seen;
  }
  ExpectPipelineBecomesIdle(*pipeline_, absl::Seconds(20));
}

}  // namespace
}  // namespace omnistage
