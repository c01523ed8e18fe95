// DnsResolver against a real DNS server (dnsmasq on loopback, tests/dns_server.h):
// A and AAAA records together, sorted and without duplicates; a name that does
// not exist, a name with no address, a refused query, a server that is not
// there and one that never answers, each with its own error.
#include "orchestrator/dns_resolver.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/dns_server.h"

namespace omnistage {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

class DnsResolverTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<DnsServer>> dns = DnsServer::Start();
    ASSERT_TRUE(dns.ok()) << dns.status();
    dns_ = *std::move(dns);
  }

  std::unique_ptr<DnsResolver> ResolverFor(const std::string& server) {
    absl::StatusOr<std::unique_ptr<DnsResolver>> resolver =
        DnsResolver::Create({server, absl::Milliseconds(300), 1});
    EXPECT_TRUE(resolver.ok()) << resolver.status();
    return resolver.ok() ? *std::move(resolver) : nullptr;
  }

  std::unique_ptr<DnsServer> dns_;
};

TEST_F(DnsResolverTest, ReturnsEveryAddressSortedOnce) {
  ASSERT_TRUE(
      dns_->Set("talker.omni.test", {"127.0.0.3", "127.0.0.2", "::1", "127.0.0.2"}).ok());
  std::unique_ptr<DnsResolver> resolver = ResolverFor(dns_->address());
  absl::StatusOr<std::vector<std::string>> answer = resolver->Resolve("talker.omni.test");
  ASSERT_TRUE(answer.ok()) << answer.status();
  EXPECT_THAT(*answer, ElementsAre("127.0.0.2", "127.0.0.3", "::1"));
}

TEST_F(DnsResolverTest, FollowsTheRecordsAsTheyChange) {
  std::unique_ptr<DnsResolver> resolver = ResolverFor(dns_->address());
  ASSERT_TRUE(dns_->Set("vocoder.omni.test", {"127.0.0.2"}).ok());
  EXPECT_THAT(*resolver->Resolve("vocoder.omni.test"), ElementsAre("127.0.0.2"));
  ASSERT_TRUE(dns_->Set("vocoder.omni.test", {"127.0.0.2", "127.0.0.4"}).ok());
  EXPECT_THAT(*resolver->Resolve("vocoder.omni.test"), ElementsAre("127.0.0.2", "127.0.0.4"));
}

TEST_F(DnsResolverTest, AMissingNameIsNotFound) {
  std::unique_ptr<DnsResolver> resolver = ResolverFor(dns_->address());
  absl::StatusOr<std::vector<std::string>> answer = resolver->Resolve("nobody.omni.test");
  EXPECT_EQ(answer.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(answer.status().message(), HasSubstr("nobody.omni.test"));
}

TEST_F(DnsResolverTest, ARefusedQueryIsUnavailable) {
  // dnsmasq answers only for .test and forwards nothing.
  std::unique_ptr<DnsResolver> resolver = ResolverFor(dns_->address());
  absl::StatusOr<std::vector<std::string>> answer = resolver->Resolve("talker.example");
  EXPECT_EQ(answer.status().code(), absl::StatusCode::kUnavailable) << answer.status();
  EXPECT_THAT(answer.status().message(), HasSubstr("talker.example"));
}

TEST_F(DnsResolverTest, AServerThatNeverAnswersTimesOut) {
  // A bound UDP socket that reads nothing: queries vanish.
  const int fd = socket(AF_INET, SOCK_DGRAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length), 0);
  std::unique_ptr<DnsResolver> resolver =
      ResolverFor(absl::StrCat("127.0.0.1:", ntohs(address.sin_port)));
  const absl::Time start = absl::Now();
  absl::StatusOr<std::vector<std::string>> answer = resolver->Resolve("talker.omni.test");
  EXPECT_EQ(answer.status().code(), absl::StatusCode::kDeadlineExceeded) << answer.status();
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  close(fd);
}

TEST_F(DnsResolverTest, AServerThatIsGoneIsUnavailable) {
  const std::string address = dns_->address();
  dns_.reset();
  std::unique_ptr<DnsResolver> resolver = ResolverFor(address);
  absl::StatusOr<std::vector<std::string>> answer = resolver->Resolve("talker.omni.test");
  EXPECT_FALSE(answer.ok());
  EXPECT_NE(answer.status().code(), absl::StatusCode::kNotFound) << answer.status();
}

TEST(DnsResolverOptionsTest, RefusesAServerThatIsNotHostPort) {
  absl::StatusOr<std::unique_ptr<DnsResolver>> resolver = DnsResolver::Create({"not a server"});
  EXPECT_EQ(resolver.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(resolver.status().message(), HasSubstr("not a server"));
}

}  // namespace
}  // namespace omnistage
