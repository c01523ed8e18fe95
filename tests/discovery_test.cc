// A stage whose replicas come from DNS, as real processes: stage workers on
// their own loopback addresses sharing one port (like the pods of a headless
// Service), a real DNS server (dnsmasq) whose records the test edits, and the
// orchestrator binary with --dns_server. While 32 requests stream, the stage
// scales 1 -> 3, every replica is replaced one by one (two by new pods on new
// addresses, one in place on its old address), and it scales 3 -> 1: no
// request fails and every output equals a run without any of it. A DNS server
// that stops knowing the name, or stops answering, evicts nothing. One that
// answers A and refuses AAAA gives the stage its A records.
#include <signal.h>

#include <iostream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "orchestrator/discovery/testing/dns_server.h"
#include "tests/pipeline_harness.h"
#include "tests/pipeline_test_util.h"
#include "tests/steady_load.h"

namespace omnistage {
namespace {

using ::testing::UnorderedElementsAreArray;

constexpr char kName[] = "llm.omni.test";
constexpr int kRefreshMs = 200;

// The addresses of stage 0's replicas, and whether each is live (not draining,
// not retiring, alive).
std::vector<std::string> LiveAddresses(const v1::PipelineStatus& status) {
  std::vector<std::string> live;
  for (const v1::ReplicaStatus& r : status.stages(0).replicas()) {
    if (r.state() == v1::ReplicaStatus::STATE_LIVE && !r.retiring()) live.push_back(r.address());
  }
  return live;
}

std::vector<std::string> ListedAddresses(const v1::PipelineStatus& status) {
  std::vector<std::string> listed;
  for (const v1::ReplicaStatus& r : status.stages(0).replicas()) listed.push_back(r.address());
  return listed;
}

class PipelineDiscoveryTest : public ::testing::Test {
 protected:
  // One discovered stage on `hosts` (all in DNS).
  void StartOn(const std::vector<std::string>& hosts,
               DnsServer::Mode mode = DnsServer::Mode::kOwnsTest) {
    absl::StatusOr<std::unique_ptr<DnsServer>> dns = DnsServer::Start(mode);
    ASSERT_TRUE(dns.ok()) << dns.status();
    dns_ = *std::move(dns);
    ASSERT_TRUE(dns_->Set(kName, hosts).ok());
    PipelineSpec spec;
    spec.name = "discovery";
    spec.dns_server = dns_->address();
    StageSpec llm = Stage("llm", "sim_llm", "batch_size=64,step_time_us=2000",
                          static_cast<int>(hosts.size()), true, "tokens");
    llm.worker_flags = {"--drain_timeout_ms=20000"};
    llm.hosts = hosts;
    llm.dns_name = kName;
    llm.refresh_ms = kRefreshMs;
    spec.stages.push_back(llm);
    pipeline_ = StartPipeline(spec);
    ASSERT_NE(pipeline_, nullptr);
    port_ = pipeline_->worker_port(0, 0);
  }

  std::string At(const std::string& host) const { return absl::StrCat(host, ":", port_); }

  // Waits until the live replicas are exactly `hosts` and nothing else is listed.
  void ExpectReplicas(const std::vector<std::string>& hosts, absl::Duration timeout) {
    std::vector<std::string> want;
    for (const std::string& host : hosts) want.push_back(At(host));
    v1::PipelineStatus last;
    const bool reached = Eventually(
        [&] {
          absl::StatusOr<v1::PipelineStatus> status = pipeline_->Status();
          if (!status.ok()) return false;
          last = *status;
          return ::testing::Value(LiveAddresses(last), UnorderedElementsAreArray(want)) &&
                 ::testing::Value(ListedAddresses(last), UnorderedElementsAreArray(want));
        },
        timeout);
    EXPECT_TRUE(reached) << "wanted " << want.size() << " replicas; status: "
                         << last.ShortDebugString();
  }

  std::string DiscoveryError() {
    absl::StatusOr<v1::PipelineStatus> status = pipeline_->Status();
    return status.ok() ? status->stages(0).discovery_error() : std::string("no status");
  }

  // Eight requests, each ending as asked (its length).
  void ExpectAllSucceed(const std::string& tag) {
    std::vector<v1::GenerateRequest> requests;
    for (int i = 0; i < 8; ++i) {
      requests.push_back(MakeRequest(absl::StrCat(tag, i), "hello", {StageParams(0, 20 + i)}));
    }
    for (const GenerateResult& r : pipeline_->GenerateAll(requests)) {
      ExpectOneTerminal(r);
      EXPECT_EQ(r.terminal.finish_reason(), v1::FINISH_REASON_LENGTH) << r.Summary();
    }
  }

  std::unique_ptr<DnsServer> dns_;
  std::unique_ptr<PipelineHarness> pipeline_;
  int port_ = 0;
};

TEST_F(PipelineDiscoveryTest, ScaleUpRollAndScaleDownUnderLoadFailNothing) {
  StartOn({"127.0.0.2"});
  absl::StatusOr<v1::PipelineStatus> status = pipeline_->Status();
  ASSERT_TRUE(status.ok());
  EXPECT_EQ(status->stages(0).replicas(0).origin(), absl::StrCat("dns:", kName));

  SteadyLoad load(pipeline_.get());
  load.Start(32);
  absl::SleepFor(absl::Milliseconds(300));

  // Scale 1 -> 3: two new pods, then DNS lists them.
  ASSERT_TRUE(pipeline_->AddWorker(0, "127.0.0.3").ok());
  ASSERT_TRUE(pipeline_->AddWorker(0, "127.0.0.4").ok());
  const absl::Time scaled = absl::Now();
  ASSERT_TRUE(dns_->Set(kName, {"127.0.0.2", "127.0.0.3", "127.0.0.4"}).ok());
  ExpectReplicas({"127.0.0.2", "127.0.0.3", "127.0.0.4"}, absl::Seconds(10));
  std::cout << "scale 1 -> 3: live after " << absl::Now() - scaled << " (refresh " << kRefreshMs
            << "ms)" << std::endl;
  // The new replicas take new requests.
  EXPECT_TRUE(Eventually(
      [&] {
        std::vector<absl::StatusOr<WorkerStats>> stats = pipeline_->Stats(0);
        if (stats.size() != 3) return false;
        for (const auto& s : stats) {
          if (!s.ok() || s->steps == 0) return false;
        }
        return true;
      },
      absl::Seconds(10)))
      << "a new replica took no request";

  // Roll: 127.0.0.3 -> .5 and 127.0.0.4 -> .6 as new pods (the new one joins,
  // the old one leaves DNS and gets SIGTERM, like a Deployment's rollout), and
  // 127.0.0.2 in place (SIGTERM, a new process on the same address).
  const std::vector<std::pair<int, std::string>> moves = {{1, "127.0.0.5"}, {2, "127.0.0.6"}};
  std::vector<std::string> hosts = {"127.0.0.2", "127.0.0.3", "127.0.0.4"};
  for (const auto& [old_replica, host] : moves) {
    ASSERT_TRUE(pipeline_->AddWorker(0, host).ok());
    hosts[old_replica] = host;
    ASSERT_TRUE(dns_->Set(kName, hosts).ok());
    pipeline_->worker_process(0, old_replica)->Signal(SIGTERM);
    EXPECT_EQ(pipeline_->worker_process(0, old_replica)->Wait(absl::Seconds(30)), 0)
        << "replica " << old_replica << " did not drain and exit 0";
    ExpectReplicas(hosts, absl::Seconds(10));
  }
  const std::string before = pipeline_->worker_instance(0, 0);
  pipeline_->worker_process(0, 0)->Signal(SIGTERM);
  EXPECT_EQ(pipeline_->worker_process(0, 0)->Wait(absl::Seconds(30)), 0);
  ASSERT_TRUE(pipeline_->RestartWorker(0, 0).ok());
  ASSERT_TRUE(pipeline_->WaitAllAlive(absl::Seconds(20)).ok());
  status = pipeline_->Status();
  ASSERT_TRUE(status.ok());
  for (const v1::ReplicaStatus& r : status->stages(0).replicas()) {
    if (r.address() == At("127.0.0.2")) {
      EXPECT_EQ(r.instance_id(), pipeline_->worker_instance(0, 0));
      EXPECT_NE(r.instance_id(), before);
    }
  }
  ExpectReplicas(hosts, absl::Seconds(10));

  // Scale 3 -> 1: the two that leave DNS drain and are removed.
  ASSERT_TRUE(dns_->Set(kName, {"127.0.0.5"}).ok());
  ExpectReplicas({"127.0.0.5"}, absl::Seconds(20));
  for (int replica : {0, 4}) {
    pipeline_->worker_process(0, replica)->Signal(SIGTERM);
    EXPECT_EQ(pipeline_->worker_process(0, replica)->Wait(absl::Seconds(30)), 0);
  }
  absl::SleepFor(absl::Milliseconds(300));
  const int identical = load.FinishAndCheck();
  EXPECT_GT(identical, 100) << "too little load to mean anything";
  std::cout << identical << " requests through scale up, roll and scale down, none failed"
            << std::endl;
  ExpectPipelineBecomesIdle(*pipeline_, absl::Seconds(20));
}

TEST_F(PipelineDiscoveryTest, ANameThatGoesAwayOrADeadDnsServerEvictsNothing) {
  StartOn({"127.0.0.2", "127.0.0.3"});

  // The name no longer exists (NXDOMAIN): the known replicas stay.
  ASSERT_TRUE(dns_->Set(kName, {}).ok());
  EXPECT_TRUE(Eventually([&] { return !DiscoveryError().empty(); }, absl::Seconds(5)));
  std::cout << "discovery_error: " << DiscoveryError() << std::endl;
  ExpectReplicas({"127.0.0.2", "127.0.0.3"}, absl::Seconds(1));
  ExpectAllSucceed("gone-");

  // It answers again.
  ASSERT_TRUE(dns_->Set(kName, {"127.0.0.2", "127.0.0.3"}).ok());
  EXPECT_TRUE(Eventually([&] { return DiscoveryError().empty(); }, absl::Seconds(5)));

  // The DNS server dies: lookups time out; still nothing is evicted.
  ASSERT_EQ(kill(dns_->pid(), SIGKILL), 0);
  EXPECT_TRUE(Eventually([&] { return !DiscoveryError().empty(); }, absl::Seconds(10)));
  std::cout << "discovery_error: " << DiscoveryError() << std::endl;
  ExpectReplicas({"127.0.0.2", "127.0.0.3"}, absl::Seconds(1));
  ExpectAllSucceed("dead-dns-");
}

// A resolver that answers A and refuses AAAA: dnsmasq without --local and with
// no upstream (DnsServer::Mode::kRefusesTheRest) answers the A query of a name
// it holds only A records for with them and its AAAA query with REFUSED (not
// NODATA), every time. The stage's replicas are the A records, they follow the
// A answers, and the refusal is no discovery error.
TEST_F(PipelineDiscoveryTest, AResolverThatRefusesAaaaGivesTheStageItsARecords) {
  StartOn({"127.0.0.2", "127.0.0.3"}, DnsServer::Mode::kRefusesTheRest);
  ASSERT_NE(pipeline_, nullptr);
  ExpectReplicas({"127.0.0.2", "127.0.0.3"}, absl::Seconds(10));
  EXPECT_EQ(DiscoveryError(), "");
  ExpectAllSucceed("refused-aaaa-");

  // 127.0.0.3 leaves the A records: it is removed, as with any answer.
  ASSERT_TRUE(dns_->Set(kName, {"127.0.0.2"}).ok());
  ExpectReplicas({"127.0.0.2"}, absl::Seconds(10));
  EXPECT_EQ(DiscoveryError(), "");
  ExpectAllSucceed("one-left-");
}

}  // namespace
}  // namespace omnistage
