#include "orchestrator/service/token_file.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace omnistage {
namespace {

constexpr char kAlice[] = "alice-0123456789abcdef";
constexpr char kOps[] = "ops-0123456789abcdef";

class TokenFileTest : public ::testing::Test {
 protected:
  TokenFileTest()
      : path_(absl::StrCat(std::getenv("TEST_TMPDIR"), "/",
                           ::testing::UnitTest::GetInstance()->current_test_info()->name(),
                           ".yaml")) {}

  // Replaces the file as a Secret update does: written aside, renamed in.
  void Write(const std::string& text) {
    const std::string temporary = path_ + ".new";
    std::ofstream(temporary) << text;
    ASSERT_EQ(std::rename(temporary.c_str(), path_.c_str()), 0);
  }

  static std::string Tokens(const std::string& entries) { return "tokens:\n" + entries; }
  static std::string Entry(const std::string& identity, const std::string& role,
                           const std::string& token) {
    return absl::StrCat("  - identity: ", identity, "\n    role: ", role, "\n    token: \"", token,
                        "\"\n");
  }

  absl::Status LoadError(const std::string& text) {
    Write(text);
    return TokenFile::Load(path_).status();
  }

  const std::string path_;
};

TEST_F(TokenFileTest, GivesEachIdentityItsPriorityCeilingAndWeight) {
  Write(Tokens(Entry("alice", "user", kAlice) + "    priority: 2\n    max_priority: 5\n" +
               "    weight: 3\n" + Entry("ops", "admin", kOps)));
  absl::StatusOr<std::unique_ptr<TokenFile>> file = TokenFile::Load(path_);
  ASSERT_TRUE(file.ok()) << file.status();
  absl::StatusOr<Caller> alice = (*file)->Find(kAlice);
  ASSERT_TRUE(alice.ok());
  EXPECT_EQ(alice->priority, 2);
  EXPECT_EQ(alice->max_priority, 5);
  EXPECT_EQ(alice->weight, 3);
  // Left out: priority 0, no raising it, weight 1.
  absl::StatusOr<Caller> ops = (*file)->Find(kOps);
  ASSERT_TRUE(ops.ok());
  EXPECT_EQ(ops->priority, 0);
  EXPECT_EQ(ops->max_priority, 0);
  EXPECT_EQ(ops->weight, 1);
}

// A gateway's token may act for others; an identity's standing is found by
// its name, without its powers (admin, acting for others).
TEST_F(TokenFileTest, AGatewayActsForTheIdentitiesTheFileNames) {
  constexpr char kGateway[] = "gateway-0123456789abcdef";
  Write(Tokens(Entry("alice", "user", kAlice) + "    priority: 2\n    weight: 3\n" +
               Entry("ops", "admin", kOps) + Entry("batch-gateway", "gateway", kGateway)));
  absl::StatusOr<std::unique_ptr<TokenFile>> file = TokenFile::Load(path_);
  ASSERT_TRUE(file.ok()) << file.status();
  absl::StatusOr<Caller> gateway = (*file)->Find(kGateway);
  ASSERT_TRUE(gateway.ok());
  EXPECT_TRUE(gateway->acts_for_others);
  EXPECT_FALSE(gateway->admin);
  EXPECT_FALSE((*file)->Find(kAlice)->acts_for_others);
  EXPECT_FALSE((*file)->Find(kOps)->acts_for_others);
  absl::StatusOr<Caller> alice = (*file)->FindIdentity("alice");
  ASSERT_TRUE(alice.ok());
  EXPECT_EQ(alice->identity, "alice");
  EXPECT_EQ(alice->priority, 2);
  EXPECT_EQ(alice->weight, 3);
  absl::StatusOr<Caller> ops = (*file)->FindIdentity("ops");
  ASSERT_TRUE(ops.ok());
  EXPECT_FALSE(ops->admin);
  EXPECT_FALSE(ops->abort_any);
  EXPECT_FALSE((*file)->FindIdentity("batch-gateway")->acts_for_others);
  EXPECT_EQ((*file)->FindIdentity("mallory").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(TokenFileTest, GivesEachIdentityItsRates) {
  Write(Tokens(Entry("alice", "user", kAlice) + "    requests_per_second: 2.5\n" +
               "    output_tokens_per_minute: 6000\n" + Entry("ops", "admin", kOps) +
               "    requests_per_second: 0.5\n    requests_burst: 4\n" +
               "    output_tokens_per_minute: 60\n    output_tokens_burst: 10\n"));
  absl::StatusOr<std::unique_ptr<TokenFile>> file = TokenFile::Load(path_);
  ASSERT_TRUE(file.ok()) << file.status();
  const RateLimits alice = (*file)->Find(kAlice)->rate_limits;
  EXPECT_EQ(alice.requests_per_second, 2.5);
  EXPECT_EQ(alice.requests_burst, 3);  // A second's worth, rounded up.
  EXPECT_EQ(alice.output_tokens_per_minute, 6000);
  EXPECT_EQ(alice.output_tokens_burst, 6000);  // A minute's worth.
  const RateLimits ops = (*file)->Find(kOps)->rate_limits;
  EXPECT_EQ(ops.requests_per_second, 0.5);
  EXPECT_EQ(ops.requests_burst, 4);
  EXPECT_EQ(ops.output_tokens_burst, 10);
  EXPECT_EQ(
      LoadError(Tokens(Entry("a", "user", kAlice) + "    requests_per_second: 0\n")).message(),
      path_ +
          ": tokens[0].requests_per_second: expected a number in [0.001, 1e+06], got "
          "'0'");
}

TEST_F(TokenFileTest, GivesEachIdentityItsObjectives) {
  Write(Tokens(
      Entry("alice", "user", kAlice) +
      "    objectives: {first_output_ms: 500, first_audio_ms: 900, criticality: critical}\n" +
      Entry("ops", "admin", kOps)));
  absl::StatusOr<std::unique_ptr<TokenFile>> file = TokenFile::Load(path_);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ((*file)->Find(kAlice)->objectives.first_output_ms, 500u);
  EXPECT_EQ((*file)->Find(kAlice)->objectives.first_audio_ms, 900u);
  EXPECT_EQ((*file)->Find(kAlice)->objectives.criticality, v1::CRITICALITY_CRITICAL);
  EXPECT_EQ((*file)->Find(kOps)->objectives.criticality, v1::CRITICALITY_UNSPECIFIED);
  EXPECT_EQ((*file)->Find(kOps)->objectives.first_output_ms, 0u);
  EXPECT_EQ(
      LoadError(Tokens(Entry("a", "user", kAlice) + "    objectives: {first_output_ms: -1}\n"))
          .message(),
      path_ +
          ": tokens[0].objectives.first_output_ms: expected a number of milliseconds in [0, "
          "600000], got '-1'");
  EXPECT_EQ(LoadError(Tokens(Entry("a", "user", kAlice) + "    objectives: {ttft: 5}\n")).message(),
            path_ +
                ": tokens[0].objectives.ttft: unknown key (known: first_output_ms, "
                "first_audio_ms, between_outputs_ms, criticality)");
}

TEST_F(TokenFileTest, RefusesPrioritiesAndWeightsOutOfRange) {
  EXPECT_EQ(LoadError(Tokens(Entry("a", "user", kAlice) + "    priority: 10\n")).message(),
            path_ + ": tokens[0].priority: expected an integer in [0, 9], got '10'");
  EXPECT_EQ(LoadError(Tokens(Entry("a", "user", kAlice) + "    weight: 0\n")).message(),
            path_ + ": tokens[0].weight: expected an integer in [1, 1000], got '0'");
  EXPECT_EQ(LoadError(Tokens(Entry("a", "user", kAlice) + "    priority: 4\n    max_priority: 3\n"))
                .message(),
            path_ + ": tokens[0].max_priority: below priority (4)");
}

TEST_F(TokenFileTest, MapsTokensToIdentityAndRole) {
  Write(Tokens(Entry("alice", "user", kAlice) + Entry("ops", "admin", kOps)));
  absl::StatusOr<std::unique_ptr<TokenFile>> file = TokenFile::Load(path_);
  ASSERT_TRUE(file.ok()) << file.status();
  absl::StatusOr<Caller> alice = (*file)->Find(kAlice);
  ASSERT_TRUE(alice.ok());
  EXPECT_EQ(alice->identity, "alice");
  EXPECT_FALSE(alice->admin);
  absl::StatusOr<Caller> ops = (*file)->Find(kOps);
  ASSERT_TRUE(ops.ok());
  EXPECT_EQ(ops->identity, "ops");
  EXPECT_TRUE(ops->admin);
  EXPECT_EQ((*file)->Find("alice-0123456789abcdeX").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ((*file)->Find("").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ((*file)->Find(std::string(kAlice) + " ").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(TokenFileTest, ChangesTakeEffectAndABrokenFileKeepsTheLastTokens) {
  Write(Tokens(Entry("alice", "user", kAlice)));
  absl::StatusOr<std::unique_ptr<TokenFile>> file = TokenFile::Load(path_);
  ASSERT_TRUE(file.ok()) << file.status();
  (*file)->set_reload_interval(absl::ZeroDuration());
  ASSERT_TRUE((*file)->Find(kAlice).ok());

  // Revoked: alice's entry removed, ops added.
  Write(Tokens(Entry("ops", "admin", kOps)));
  EXPECT_EQ((*file)->Find(kAlice).status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE((*file)->Find(kOps).ok());

  // A broken update keeps what was in force.
  Write("tokens: [");
  EXPECT_TRUE((*file)->Find(kOps).ok());
  Write(Tokens(Entry("alice", "admin", kAlice)));
  absl::StatusOr<Caller> alice = (*file)->Find(kAlice);
  ASSERT_TRUE(alice.ok());
  EXPECT_TRUE(alice->admin);
}

TEST_F(TokenFileTest, RefusesWhatCouldNotBeSafeNamingTheField) {
  const std::string at = path_ + ": ";
  EXPECT_EQ(LoadError(Tokens(Entry("alice", "root", kAlice))).message(),
            at + "tokens[0].role: expected user, admin or gateway, got 'root'");
  EXPECT_EQ(LoadError(Tokens(Entry("alice", "user", "short"))).message(),
            at + "tokens[0].token: shorter than 16 characters: it could be guessed");
  EXPECT_EQ(LoadError(Tokens(Entry("alice", "user", "has a space in it!!"))).message(),
            at + "tokens[0].token: contains spaces or control characters");
  EXPECT_EQ(LoadError(Tokens(Entry("al ice", "user", kAlice))).message(),
            at + "tokens[0].identity: 1 to 128 of letters, digits and . _ - : @");
  EXPECT_EQ(
      LoadError(Tokens(Entry("alice", "user", kAlice) + Entry("bob", "user", kAlice))).message(),
      at + "tokens[1].token: the same as tokens[0].token");
  EXPECT_EQ(LoadError("tokens:\n  - identity: alice\n    role: user\n").message(),
            at + "tokens[0].token: required");
  EXPECT_EQ(LoadError("tokens: alice\n").message(),
            at + "tokens: expected a list of {identity, role, token}, got 'alice'");
  EXPECT_EQ(LoadError("users: []\n").message(), at + "users: unknown key (known: tokens)");
  std::remove(path_.c_str());
  EXPECT_EQ(TokenFile::Load(path_).status().message(),
            "cannot read " + path_ + ": No such file or directory");
}

}  // namespace
}  // namespace omnistage
