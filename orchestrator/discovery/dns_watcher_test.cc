// DnsWatcher against a real DNS server (dnsmasq on loopback): answers become
// host:port lists (IPv6 in brackets), each stage is looked up at its own
// refresh period, a change is seen within one refresh, a failed lookup is
// reported as such, and Stop() ends the reports. Against a server that answers
// A and refuses AAAA, the A records are the replicas, the refusal is logged
// once, and the AAAA addresses known before the refusals stay.
#include "orchestrator/discovery/dns_watcher.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "orchestrator/discovery/testing/dns_server.h"

namespace omnistage {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Every report, by stage, in order.
class Reports {
 public:
  DnsWatcher::Report Recorder() {
    return [this](int stage, const absl::StatusOr<std::vector<std::string>>& addresses) {
      absl::MutexLock lock(&mu_);
      by_stage_[stage].push_back(addresses);
    };
  }
  // Waits (up to 5 s) for a report of `stage` that `match` accepts.
  template <typename Match>
  bool WaitFor(int stage, Match match) {
    const absl::Time deadline = absl::Now() + absl::Seconds(5);
    while (absl::Now() < deadline) {
      {
        absl::MutexLock lock(&mu_);
        for (const auto& report : by_stage_[stage]) {
          if (match(report)) return true;
        }
      }
      absl::SleepFor(absl::Milliseconds(10));
    }
    return false;
  }
  // Waits (up to 5 s) until `stage` has `n` reports.
  bool WaitForCount(int stage, size_t n) {
    const absl::Time deadline = absl::Now() + absl::Seconds(5);
    while (count(stage) < n) {
      if (absl::Now() >= deadline) return false;
      absl::SleepFor(absl::Milliseconds(10));
    }
    return true;
  }
  size_t count(int stage) {
    absl::MutexLock lock(&mu_);
    return by_stage_[stage].size();
  }
  std::vector<absl::StatusOr<std::vector<std::string>>> of(int stage) {
    absl::MutexLock lock(&mu_);
    return by_stage_[stage];
  }

 private:
  absl::Mutex mu_;
  std::map<int, std::vector<absl::StatusOr<std::vector<std::string>>>> by_stage_;
};

class DnsWatcherTest : public ::testing::Test {
 protected:
  explicit DnsWatcherTest(DnsServer::Mode mode = DnsServer::Mode::kOwnsTest) : mode_(mode) {}
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<DnsServer>> dns = DnsServer::Start(mode_);
    ASSERT_TRUE(dns.ok()) << dns.status();
    dns_ = *std::move(dns);
  }
  DnsResolverOptions Resolver() const { return {dns_->address(), absl::Milliseconds(300), 1}; }

  const DnsServer::Mode mode_;
  std::unique_ptr<DnsServer> dns_;
  Reports reports_;
};

TEST_F(DnsWatcherTest, ReportsAddressesAndSeesChangesWithinARefresh) {
  ASSERT_TRUE(dns_->Set("talker.omni.test", {"127.0.0.3", "127.0.0.2", "::1"}).ok());
  auto watcher = DnsWatcher::Start(
      Resolver(), {{1, "talker.omni.test", 9000, absl::Milliseconds(100)}}, reports_.Recorder());
  ASSERT_TRUE(watcher.ok()) << watcher.status();
  const std::vector<std::string> first = {"127.0.0.2:9000", "127.0.0.3:9000", "[::1]:9000"};
  EXPECT_TRUE(reports_.WaitFor(1, [&](const auto& r) { return r.ok() && *r == first; }));

  ASSERT_TRUE(dns_->Set("talker.omni.test", {"127.0.0.4"}).ok());
  EXPECT_TRUE(reports_.WaitFor(1, [](const auto& r) {
    return r.ok() && *r == std::vector<std::string>{"127.0.0.4:9000"};
  }));
}

TEST_F(DnsWatcherTest, AFailedLookupIsReportedAndTheNextRefreshTriesAgain) {
  auto watcher = DnsWatcher::Start(
      Resolver(), {{0, "later.omni.test", 9000, absl::Milliseconds(100)}}, reports_.Recorder());
  ASSERT_TRUE(watcher.ok()) << watcher.status();
  EXPECT_TRUE(reports_.WaitFor(0, [](const auto& r) {
    return r.status().code() == absl::StatusCode::kNotFound &&
           absl::StrContains(r.status().message(), "later.omni.test: no address (no such name)");
  }));
  ASSERT_TRUE(dns_->Set("later.omni.test", {"127.0.0.2"}).ok());
  EXPECT_TRUE(reports_.WaitFor(0, [](const auto& r) { return r.ok(); }));
}

TEST_F(DnsWatcherTest, EachStageAtItsOwnPeriodAndStopEndsTheReports) {
  ASSERT_TRUE(dns_->Set("fast.omni.test", {"127.0.0.2"}).ok());
  ASSERT_TRUE(dns_->Set("slow.omni.test", {"127.0.0.3"}).ok());
  auto watcher = DnsWatcher::Start(Resolver(),
                                   {{0, "fast.omni.test", 1, absl::Milliseconds(50)},
                                    {2, "slow.omni.test", 2, absl::Seconds(60)}},
                                   reports_.Recorder());
  ASSERT_TRUE(watcher.ok()) << watcher.status();
  EXPECT_TRUE(reports_.WaitForCount(0, 5));
  EXPECT_EQ(reports_.count(2), 1u);  // Looked up once, at the start.
  (*watcher)->Stop();
  const size_t after_stop = reports_.count(0);
  absl::SleepFor(absl::Milliseconds(200));
  EXPECT_EQ(reports_.count(0), after_stop);
}

// A resolver that answers A and refuses AAAA: dnsmasq with no upstream and no
// --local (DnsServer::Mode::kRefusesTheRest) answers the A query of a name it
// holds only A records for with them (NOERROR) and its AAAA query with REFUSED
// (no record, not NODATA), every time; c-ares 1.18 ends that query with
// ARES_ECONNREFUSED, which DnsResolver reports as UNAVAILABLE.
class RefusingDnsWatcherTest : public DnsWatcherTest {
 protected:
  RefusingDnsWatcherTest() : DnsWatcherTest(DnsServer::Mode::kRefusesTheRest) {}
};

TEST_F(RefusingDnsWatcherTest, TheAnsweredFamilyGivesTheReplicasAndTheRefusalIsLoggedOnce) {
  ASSERT_TRUE(dns_->Set("talker.omni.test", {"127.0.0.2", "127.0.0.3"}).ok());
  ::testing::internal::CaptureStderr();
  auto watcher = DnsWatcher::Start(
      Resolver(), {{1, "talker.omni.test", 9000, absl::Milliseconds(50)}}, reports_.Recorder());
  ASSERT_TRUE(watcher.ok()) << watcher.status();
  EXPECT_TRUE(reports_.WaitForCount(1, 5));
  (*watcher)->Stop();
  const std::vector<std::string> lines =
      absl::StrSplit(::testing::internal::GetCapturedStderr(), '\n', absl::SkipEmpty());
  for (const auto& report : reports_.of(1)) {
    ASSERT_TRUE(report.ok()) << report.status();
    EXPECT_THAT(*report, ElementsAre("127.0.0.2:9000", "127.0.0.3:9000"));
  }
  // One line, naming the name, the family and why, though every lookup is
  // refused.
  EXPECT_THAT(lines, ElementsAre(HasSubstr("DNS lookup of talker.omni.test (AAAA): no server "
                                           "answered it: each refused it (REFUSED)")));
}

TEST_F(RefusingDnsWatcherTest, ARefusedFamilyKeepsItsLastAddressesWhileTheOtherFollows) {
  ASSERT_TRUE(dns_->Set("talker.omni.test", {"127.0.0.2", "::1"}).ok());
  auto watcher = DnsWatcher::Start(
      Resolver(), {{1, "talker.omni.test", 9000, absl::Milliseconds(50)}}, reports_.Recorder());
  ASSERT_TRUE(watcher.ok()) << watcher.status();
  const std::vector<std::string> both = {"127.0.0.2:9000", "[::1]:9000"};
  ASSERT_TRUE(reports_.WaitFor(1, [&](const auto& r) { return r.ok() && *r == both; }));

  // ::1 goes from the hosts file: its AAAA query is now refused, not empty.
  ASSERT_TRUE(dns_->Set("talker.omni.test", {"127.0.0.3"}).ok());
  const std::vector<std::string> moved = {"127.0.0.3:9000", "[::1]:9000"};
  EXPECT_TRUE(reports_.WaitFor(1, [&](const auto& r) { return r.ok() && *r == moved; }));
  const size_t seen = reports_.count(1);
  EXPECT_TRUE(reports_.WaitForCount(1, seen + 3));
  (*watcher)->Stop();
  for (const auto& report : reports_.of(1)) {
    ASSERT_TRUE(report.ok()) << report.status();
    EXPECT_THAT(*report, ::testing::Contains("[::1]:9000"));
  }
}

TEST_F(DnsWatcherTest, ABadServerAddressIsRefusedAtStart) {
  auto watcher = DnsWatcher::Start({"not an address", absl::Seconds(1), 1}, {},
                                   reports_.Recorder());
  EXPECT_EQ(watcher.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace omnistage
