// Network partitions with real sockets. The test runs in a network namespace of
// its own (partition_test.sh starts it under `unshare -n`), where each
// worker listens on its own loopback address and nftables rules drop its traffic:
// - a replica cut off both ways is found by keepalive within its bound, fails
//   only the requests bound to it, and is admitted again once the rule goes;
// - the same when only the orchestrator -> worker direction is lost.
// No rule is ever made outside that namespace: the test refuses to run in the
// host's.
#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/pipeline_harness.h"
#include "tests/pipeline_test_util.h"

namespace omnistage {
namespace {

constexpr int kVictim = 1;
constexpr char kVictimHost[] = "127.0.0.3";

// True when this process runs in a network namespace other than the one the
// wrapper script started in (it passes that one's inode number).
bool InOwnNetworkNamespace() {
  const char* outer = std::getenv("OMNISTAGE_OUTER_NETNS");
  struct stat own;
  if (outer == nullptr || stat("/proc/self/ns/net", &own) != 0) return false;
  return std::to_string(own.st_ino) != outer;
}

// An nftables table of the test's own, removed when the test ends.
class Firewall {
 public:
  Firewall() { Apply("add table inet omnistage_test\n"); }
  ~Firewall() { Apply("delete table inet omnistage_test\n"); }

  // Drops incoming packets that match `match` (nft syntax), e.g. "ip daddr 127.0.0.3".
  void Drop(const std::vector<std::string>& matches) {
    std::string script =
        "add chain inet omnistage_test input { type filter hook input priority 0 ; }\n";
    for (const std::string& match : matches) {
      absl::StrAppend(&script, "add rule inet omnistage_test input ", match, " drop\n");
    }
    Apply(script);
  }
  void Heal() { Apply("flush table inet omnistage_test\n"); }

 private:
  static void Apply(const std::string& script) {
    const char* tmp = std::getenv("TEST_TMPDIR");
    const std::string path = absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/rules.nft");
    std::ofstream(path) << script;
    ASSERT_EQ(std::system(absl::StrCat("nft -f ", path).c_str()), 0) << script;
  }
};

PipelineSpec TwoHosts() {
  PipelineSpec spec;
  spec.name = "partition";
  spec.keepalive_ms = 300;
  spec.keepalive_timeout_ms = 300;
  StageSpec llm = Stage("llm", "sim_llm", "batch_size=64,step_time_us=5000", 2, true, "tokens");
  llm.hosts = {"127.0.0.2", kVictimHost};
  spec.stages.push_back(llm);
  return spec;
}

class PipelinePartitionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(InOwnNetworkNamespace())
        << "run under `unshare -n` (partition_test.sh) so no rule touches the host";
    pipeline_ = StartPipeline(TwoHosts());
    ASSERT_NE(pipeline_, nullptr);
  }

  // Starts long requests (400 steps of 5 ms) on both replicas, applies `cut`,
  // and checks that exactly the victim's requests fail, within the keepalive
  // bound, and that the victim comes back once the cut heals.
  void CutAndHeal(const std::vector<std::string>& cut) {
    std::vector<std::unique_ptr<GenerateCall>> calls;
    for (int i = 0; i < 6; ++i) {
      calls.push_back(pipeline_->StartGenerate(
          MakeRequest(absl::StrCat("r", i), absl::StrCat("prompt ", i), {StageParams(0, 400)})));
      ASSERT_TRUE(calls.back()->WaitForOutput(absl::Seconds(30)));
    }
    absl::StatusOr<v1::PipelineStatus> before = pipeline_->Status();
    ASSERT_TRUE(before.ok());
    const int victims = BoundRequests(*before, 0, kVictim);
    ASSERT_EQ(victims, 3);
    const std::string instance = before->stages(0).replicas(kVictim).instance_id();

    Firewall firewall;
    const absl::Time cut_at = absl::Now();
    firewall.Drop(cut);
    ASSERT_TRUE(Eventually(
        [&] {
          absl::StatusOr<v1::PipelineStatus> now = pipeline_->Status();
          return now.ok() && !now->stages(0).replicas(kVictim).alive();
        },
        absl::Seconds(10), absl::Milliseconds(10)));
    const absl::Duration detected = absl::Now() - cut_at;
    std::cout << "the cut was detected after " << detected << std::endl;
    // keepalive_ms + keepalive_timeout_ms, plus the ping that was already due.
    EXPECT_LT(detected, absl::Seconds(2)) << "keepalive bound exceeded";

    int failed = 0;
    for (auto& call : calls) {
      const GenerateResult r = call->Wait(absl::Seconds(30));
      ExpectOneTerminal(r);
      if (r.terminal.finish_reason() == v1::FINISH_REASON_ERROR) {
        ++failed;
        EXPECT_EQ(r.terminal.error().replica(), kVictim) << r.Summary();
        EXPECT_TRUE(absl::StrContains(r.terminal.error().message(), "stage 0 (llm) replica 1 died"))
            << r.Summary();
      } else {
        EXPECT_EQ(r.terminal.finish_reason(), v1::FINISH_REASON_LENGTH) << r.Summary();
        EXPECT_EQ(r.tokens.size(), 400u) << r.Summary();
      }
    }
    EXPECT_EQ(failed, victims);

    firewall.Heal();
    ASSERT_TRUE(pipeline_->WaitAllAlive(absl::Seconds(30)).ok());
    absl::StatusOr<v1::PipelineStatus> after = pipeline_->Status();
    ASSERT_TRUE(after.ok());
    // The same process, admitted again as a fresh incarnation: nothing bound.
    EXPECT_EQ(after->stages(0).replicas(kVictim).instance_id(), instance);
    EXPECT_EQ(after->stages(0).replicas(kVictim).bound_requests(), 0);
    // The worker drops the cut-off session's work once it notices the session is gone.
    ExpectPipelineBecomesIdle(*pipeline_, absl::Seconds(45));
    std::vector<v1::GenerateRequest> again;
    for (int i = 0; i < 4; ++i) {
      again.push_back(MakeRequest(absl::StrCat("again", i), "x", {StageParams(0, 5)}));
    }
    for (const GenerateResult& r : pipeline_->GenerateAll(again)) {
      ExpectOneTerminal(r);
      EXPECT_EQ(r.terminal.finish_reason(), v1::FINISH_REASON_LENGTH) << r.Summary();
    }
  }

  std::unique_ptr<PipelineHarness> pipeline_;
};

TEST_F(PipelinePartitionTest, ReplicaCutOffBothWaysFailsOnlyItsRequestsAndReturns) {
  CutAndHeal({absl::StrCat("ip daddr ", kVictimHost), absl::StrCat("ip saddr ", kVictimHost)});
}

TEST_F(PipelinePartitionTest, OrchestratorToWorkerLossAloneIsFoundTheSameWay) {
  // Only what goes to the worker's port is lost; what it sends still arrives.
  CutAndHeal({absl::StrCat("ip daddr ", kVictimHost, " tcp dport ",
                           pipeline_->worker_port(0, kVictim))});
}

}  // namespace
}  // namespace omnistage
