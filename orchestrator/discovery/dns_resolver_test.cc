// DnsResolver against a real DNS server (dnsmasq on loopback, orchestrator/discovery/testing/dns_server.h):
// the A and the AAAA records of a name, each family sorted and without
// duplicates; a name that does not exist and a name without one family are
// empty answers (NXDOMAIN, NODATA); a family the server refuses fails while the
// other answers; a refused query, a server that is not there and one that never
// answers fail each family, each with its own error.
#include "orchestrator/discovery/dns_resolver.h"

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
#include "orchestrator/discovery/testing/dns_server.h"

namespace omnistage {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

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

TEST_F(DnsResolverTest, ReturnsEachFamilysAddressesSortedOnce) {
  ASSERT_TRUE(
      dns_->Set("talker.omni.test", {"127.0.0.3", "127.0.0.2", "::1", "127.0.0.2"}).ok());
  std::unique_ptr<DnsResolver> resolver = ResolverFor(dns_->address());
  const DnsAnswer answer = resolver->Lookup("talker.omni.test");
  ASSERT_TRUE(answer.a.status.ok()) << answer.a.status;
  ASSERT_TRUE(answer.aaaa.status.ok()) << answer.aaaa.status;
  EXPECT_THAT(answer.a.addresses, ElementsAre("127.0.0.2", "127.0.0.3"));
  EXPECT_THAT(answer.aaaa.addresses, ElementsAre("::1"));
}

TEST_F(DnsResolverTest, FollowsTheRecordsAsTheyChange) {
  std::unique_ptr<DnsResolver> resolver = ResolverFor(dns_->address());
  ASSERT_TRUE(dns_->Set("vocoder.omni.test", {"127.0.0.2"}).ok());
  EXPECT_THAT(resolver->Lookup("vocoder.omni.test").a.addresses, ElementsAre("127.0.0.2"));
  ASSERT_TRUE(dns_->Set("vocoder.omni.test", {"127.0.0.2", "127.0.0.4"}).ok());
  EXPECT_THAT(resolver->Lookup("vocoder.omni.test").a.addresses,
              ElementsAre("127.0.0.2", "127.0.0.4"));
}

TEST_F(DnsResolverTest, AMissingNameIsAnEmptyAnswerInBothFamilies) {
  std::unique_ptr<DnsResolver> resolver = ResolverFor(dns_->address());
  const DnsAnswer answer = resolver->Lookup("nobody.omni.test");
  for (const DnsRecords* family : {&answer.a, &answer.aaaa}) {
    EXPECT_TRUE(family->status.ok()) << family->status;
    EXPECT_THAT(family->addresses, IsEmpty());
    EXPECT_TRUE(family->no_such_name);
  }
}

TEST_F(DnsResolverTest, AFamilyTheNameLacksIsAnEmptyAnswer) {
  // dnsmasq owns .test (--local=/test/): the AAAA of a name it has only an A
  // record for is NOERROR with no record (NODATA).
  ASSERT_TRUE(dns_->Set("thinker.omni.test", {"127.0.0.2"}).ok());
  std::unique_ptr<DnsResolver> resolver = ResolverFor(dns_->address());
  const DnsAnswer answer = resolver->Lookup("thinker.omni.test");
  EXPECT_THAT(answer.a.addresses, ElementsAre("127.0.0.2"));
  EXPECT_TRUE(answer.aaaa.status.ok()) << answer.aaaa.status;
  EXPECT_THAT(answer.aaaa.addresses, IsEmpty());
  EXPECT_FALSE(answer.aaaa.no_such_name);
}

TEST_F(DnsResolverTest, AFamilyTheServerRefusesFailsAndTheOtherAnswers) {
  // dnsmasq with no upstream and no --local: it answers the A record it holds
  // and refuses (REFUSED) the AAAA query it would have to forward.
  absl::StatusOr<std::unique_ptr<DnsServer>> refusing =
      DnsServer::Start(DnsServer::Mode::kRefusesTheRest);
  ASSERT_TRUE(refusing.ok()) << refusing.status();
  ASSERT_TRUE((*refusing)->Set("talker.omni.test", {"127.0.0.2"}).ok());
  std::unique_ptr<DnsResolver> resolver = ResolverFor((*refusing)->address());
  const DnsAnswer answer = resolver->Lookup("talker.omni.test");
  ASSERT_TRUE(answer.a.status.ok()) << answer.a.status;
  EXPECT_THAT(answer.a.addresses, ElementsAre("127.0.0.2"));
  EXPECT_EQ(answer.aaaa.status.code(), absl::StatusCode::kUnavailable) << answer.aaaa.status;
  EXPECT_THAT(answer.aaaa.status.message(), HasSubstr("talker.omni.test (AAAA)"));
  // c-ares 1.18 calls a refusal "Could not contact DNS servers"; the message
  // says it may be one.
  EXPECT_THAT(answer.aaaa.status.message(), HasSubstr("refused it (REFUSED)"));
  EXPECT_THAT(answer.aaaa.addresses, IsEmpty());
}

TEST_F(DnsResolverTest, ARefusedQueryIsUnavailableInBothFamilies) {
  // dnsmasq answers only for .test and forwards nothing.
  std::unique_ptr<DnsResolver> resolver = ResolverFor(dns_->address());
  const DnsAnswer answer = resolver->Lookup("talker.example");
  EXPECT_EQ(answer.a.status.code(), absl::StatusCode::kUnavailable) << answer.a.status;
  EXPECT_EQ(answer.aaaa.status.code(), absl::StatusCode::kUnavailable) << answer.aaaa.status;
  EXPECT_THAT(answer.a.status.message(), HasSubstr("talker.example (A)"));
  EXPECT_THAT(answer.aaaa.status.message(), HasSubstr("talker.example (AAAA)"));
  EXPECT_THAT(answer.a.addresses, IsEmpty());
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
  const DnsAnswer answer = resolver->Lookup("talker.omni.test");
  EXPECT_EQ(answer.a.status.code(), absl::StatusCode::kDeadlineExceeded) << answer.a.status;
  EXPECT_EQ(answer.aaaa.status.code(), absl::StatusCode::kDeadlineExceeded) << answer.aaaa.status;
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  close(fd);
}

TEST_F(DnsResolverTest, AServerThatIsGoneIsUnavailable) {
  const std::string address = dns_->address();
  dns_.reset();
  std::unique_ptr<DnsResolver> resolver = ResolverFor(address);
  const DnsAnswer answer = resolver->Lookup("talker.omni.test");
  // Failed (not an answer, empty or not) in both families.
  EXPECT_FALSE(answer.a.status.ok());
  EXPECT_FALSE(answer.aaaa.status.ok());
}

TEST(DnsResolverOptionsTest, RefusesAServerThatIsNotHostPort) {
  absl::StatusOr<std::unique_ptr<DnsResolver>> resolver = DnsResolver::Create({"not a server"});
  EXPECT_EQ(resolver.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(resolver.status().message(), HasSubstr("not a server"));
}

}  // namespace
}  // namespace omnistage
