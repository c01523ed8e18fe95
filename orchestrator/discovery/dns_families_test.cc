// DnsFamilies: the merge rule of a name's A and AAAA answers. Both answer: both
// are taken. One answers and the other fails: the failed family keeps what it
// last answered (nothing, before it ever did) while the answered one follows
// its answer. Both fail: an error, and nothing changes. An empty answer
// (NODATA, NXDOMAIN) empties that family. A family's failure is logged once per
// new reason, and its recovery once.
#include "orchestrator/discovery/dns_families.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace omnistage {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::SizeIs;

constexpr char kName[] = "talker.omni.test";

DnsRecords Answered(std::vector<std::string> addresses) {
  DnsRecords records;
  records.addresses = std::move(addresses);
  return records;
}

DnsRecords NoSuchName() {
  DnsRecords records;
  records.no_such_name = true;
  return records;
}

DnsRecords Failed(const char* type, const std::string& reason) {
  DnsRecords records;
  records.status =
      absl::UnavailableError(std::string("DNS lookup of ") + kName + " (" + type + "): " + reason);
  return records;
}

DnsAnswer Answer(DnsRecords a, DnsRecords aaaa) {
  DnsAnswer answer;
  answer.a = std::move(a);
  answer.aaaa = std::move(aaaa);
  return answer;
}

class DnsFamiliesTest : public ::testing::Test {
 protected:
  // The addresses after an answer of `a` and `aaaa`; an error fails the test.
  std::vector<std::string> Ips(DnsRecords a, DnsRecords aaaa) {
    absl::StatusOr<std::vector<std::string>> ips =
        families_.Update(Answer(std::move(a), std::move(aaaa)));
    EXPECT_TRUE(ips.ok()) << ips.status();
    return ips.ok() ? *ips : std::vector<std::string>{ips.status().ToString()};
  }
  // Why an answer of `a` and `aaaa` gives no address.
  absl::Status ErrorOf(DnsRecords a, DnsRecords aaaa) {
    return families_.Update(Answer(std::move(a), std::move(aaaa))).status();
  }

  DnsFamilies families_{kName};
};

TEST_F(DnsFamiliesTest, BothFamiliesAnswerTogetherSorted) {
  EXPECT_THAT(Ips(Answered({"10.0.0.2", "10.0.0.1"}), Answered({"fd00::1"})),
              ElementsAre("10.0.0.1", "10.0.0.2", "fd00::1"));
  EXPECT_THAT(Ips(Answered({"10.0.0.3"}), Answered({"fd00::2"})),
              ElementsAre("10.0.0.3", "fd00::2"));
}

TEST_F(DnsFamiliesTest, AFamilyThatFailsKeepsWhatItLastAnsweredWhileTheOtherFollows) {
  Ips(Answered({"10.0.0.1"}), Answered({"fd00::1"}));
  EXPECT_THAT(Ips(Answered({"10.0.0.2"}), Failed("AAAA", "refused")),
              ElementsAre("10.0.0.2", "fd00::1"));
  // And the other way round.
  EXPECT_THAT(Ips(Failed("A", "refused"), Answered({"fd00::3"})),
              ElementsAre("10.0.0.2", "fd00::3"));
}

TEST_F(DnsFamiliesTest, AFamilyThatNeverAnsweredGivesNothingAndTheOtherItsAddresses) {
  // The reported bug: every AAAA query refused, the A records are the replicas.
  for (int i = 0; i < 3; ++i) {
    EXPECT_THAT(Ips(Answered({"10.0.0.1", "10.0.0.2"}), Failed("AAAA", "refused")),
                ElementsAre("10.0.0.1", "10.0.0.2"));
  }
}

TEST_F(DnsFamiliesTest, WhenEveryFamilyFailsItIsAnErrorAndNothingChanges) {
  Ips(Answered({"10.0.0.1"}), Answered({"fd00::1"}));
  DnsRecords timeout;
  timeout.status = absl::DeadlineExceededError("DNS lookup of talker.omni.test (A): timeout");
  const absl::Status error = ErrorOf(timeout, Failed("AAAA", "refused"));
  EXPECT_EQ(error.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(error.message(),
            "DNS lookup of talker.omni.test (A): timeout; "
            "DNS lookup of talker.omni.test (AAAA): refused");
  // Both families still hold what they had: each shows through the other's
  // failure.
  EXPECT_THAT(Ips(Failed("A", "refused"), Answered({"fd00::2"})),
              ElementsAre("10.0.0.1", "fd00::2"));
  EXPECT_THAT(Ips(Answered({"10.0.0.3"}), Failed("AAAA", "refused")),
              ElementsAre("10.0.0.3", "fd00::2"));
}

TEST_F(DnsFamiliesTest, AnEmptyAnswerEmptiesThatFamily) {
  Ips(Answered({"10.0.0.1"}), Answered({"fd00::1"}));
  // NODATA: the name has no AAAA record any more.
  EXPECT_THAT(Ips(Answered({"10.0.0.1"}), Answered({})), ElementsAre("10.0.0.1"));
  // Then the AAAA lookup fails: there is no AAAA address to keep.
  EXPECT_THAT(Ips(Answered({"10.0.0.1"}), Failed("AAAA", "refused")), ElementsAre("10.0.0.1"));
}

TEST_F(DnsFamiliesTest, NoAddressInAnyFamilyIsNotFoundSayingWhy) {
  Ips(Answered({"10.0.0.1"}), Answered({"fd00::1"}));
  absl::Status error = ErrorOf(NoSuchName(), NoSuchName());
  EXPECT_EQ(error.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(error.message(), "DNS lookup of talker.omni.test: no address (no such name)");
  error = ErrorOf(Answered({}), Answered({}));
  EXPECT_EQ(error.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(error.message(),
            "DNS lookup of talker.omni.test: no address (no A record, no AAAA record)");
  // Both families answered empty before: the failed one has nothing to keep.
  error = ErrorOf(Answered({}), Failed("AAAA", "refused"));
  EXPECT_EQ(error.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(error.message(),
            "DNS lookup of talker.omni.test: no address (no A record, the AAAA lookup failed)");
}

TEST_F(DnsFamiliesTest, AFailedFamilyIsLoggedOncePerNewReasonAndOnceWhenItAnswersAgain) {
  ::testing::internal::CaptureStderr();
  Ips(Answered({"10.0.0.1"}), Answered({"fd00::1"}));
  for (int i = 0; i < 3; ++i) Ips(Answered({"10.0.0.1"}), Failed("AAAA", "refused"));
  for (int i = 0; i < 2; ++i) Ips(Answered({"10.0.0.1"}), Failed("AAAA", "SERVFAIL"));
  for (int i = 0; i < 2; ++i) Ips(Answered({"10.0.0.1"}), Answered({"fd00::1"}));
  const std::vector<std::string> lines =
      absl::StrSplit(::testing::internal::GetCapturedStderr(), '\n', absl::SkipEmpty());
  EXPECT_THAT(lines, Contains(HasSubstr("DNS lookup of talker.omni.test (AAAA): refused; keeping "
                                        "the 1 AAAA address(es) it last answered"))
                         .Times(1));
  EXPECT_THAT(lines, Contains(HasSubstr("(AAAA): SERVFAIL; keeping the 1 AAAA")).Times(1));
  EXPECT_THAT(lines,
              Contains(HasSubstr("DNS lookup of talker.omni.test (AAAA) answers again")).Times(1));
  EXPECT_THAT(lines, SizeIs(3));
}

TEST_F(DnsFamiliesTest, WhenEveryFamilyFailsNoFamilyIsLogged) {
  // The error is reported instead; whoever applies it logs it once.
  ::testing::internal::CaptureStderr();
  EXPECT_FALSE(ErrorOf(Failed("A", "refused"), Failed("AAAA", "refused")).ok());
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
}

}  // namespace
}  // namespace omnistage
