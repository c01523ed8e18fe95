// Ownership: a request belongs to the identity that started it. Another
// identity's Abort finds nothing (NOT_FOUND, exactly as for an id never used)
// and touches no worker; generated ids cannot be guessed.
#include <set>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/strip.h"
#include "common/retry_hint.h"
#include "orchestrator/core/testing/pipeline_core_harness.h"

namespace omnistage {
namespace pipeline_core_test {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

std::vector<std::string> Outcomes(const v1::AbortResponse& response) {
  std::vector<std::string> out;
  for (const v1::AbortResult& r : response.results()) {
    out.push_back(absl::StrCat(r.request_id(), "=",
                               absl::AsciiStrToLower(absl::StripPrefix(
                                   v1::AbortResult::Outcome_Name(r.outcome()), "OUTCOME_"))));
  }
  return out;
}

TEST_F(PipelineCoreTest, AnotherIdentitysAbortIsNotFoundAndTouchesNothing) {
  Build(Shape{});
  auto alices = Gen("a1", {v1::MODALITY_TEXT}, "alice");
  auto bobs = Gen("b1", {v1::MODALITY_TEXT}, "bob");
  Out(0, 0, "a1", {Text("Hel")});
  ClearLog();

  absl::StatusOr<v1::AbortResponse> aborted = AbortNow({"a1", "b1", "never"}, "bob");
  ASSERT_TRUE(aborted.ok()) << aborted.status();
  EXPECT_THAT(Outcomes(*aborted), ElementsAre("a1=not_found", "b1=aborted", "never=not_found"));
  EXPECT_THAT(LogWith("a1"), IsEmpty()) << "no worker heard of a1";
  EXPECT_EQ(alices->terminal_count(), 0);
  EXPECT_EQ(bobs->terminal().finish_reason(), v1::FINISH_REASON_ABORT);

  // Without authentication (identity "") nobody owns alice's request either.
  aborted = AbortNow({"a1"});
  ASSERT_TRUE(aborted.ok());
  EXPECT_THAT(Outcomes(*aborted), ElementsAre("a1=not_found"));

  // Its owner can.
  aborted = AbortNow({"a1"}, "alice");
  ASSERT_TRUE(aborted.ok());
  EXPECT_THAT(Outcomes(*aborted), ElementsAre("a1=aborted"));
  EXPECT_EQ(alices->terminal().finish_reason(), v1::FINISH_REASON_ABORT);
  EXPECT_EQ(alices->Text("a1"), "Hel");
}

// An admin token's holder may abort any identity's request; the abort is
// logged with both identities.
TEST_F(PipelineCoreTest, AnAdminAbortsAnyIdentitysRequestAndItIsLogged) {
  Build(Shape{});
  auto alices = Gen("a1", {v1::MODALITY_TEXT}, "alice");
  Out(0, 0, "a1", {Text("Hel")});
  testing::internal::CaptureStderr();
  absl::StatusOr<v1::AbortResponse> aborted = AbortNow({"a1", "never"}, "ops", true);
  const std::string log = testing::internal::GetCapturedStderr();
  ASSERT_TRUE(aborted.ok()) << aborted.status();
  EXPECT_THAT(Outcomes(*aborted), ElementsAre("a1=aborted", "never=not_found"));
  EXPECT_EQ(alices->terminal().finish_reason(), v1::FINISH_REASON_ABORT);
  EXPECT_EQ(alices->Text("a1"), "Hel");
  EXPECT_THAT(log, HasSubstr("request=a1 admin 'ops' aborts this request of 'alice'"));
}

// Found by the core fuzz target: the drain's abort of everything must not be
// limited to one identity's requests.
TEST_F(PipelineCoreTest, ADrainStopsEveryIdentitysRequests) {
  Build(Shape{});
  auto alices = Gen("a1", {v1::MODALITY_TEXT}, "alice");
  auto bobs = Gen("b1", {v1::MODALITY_TEXT}, "bob");
  auto anyones = Gen("u1", {v1::MODALITY_TEXT});
  int drained = 0;
  core().Drain(scheduler_.Now() + absl::Seconds(1), [&] { ++drained; });
  scheduler_.AdvanceBy(absl::Seconds(1));
  for (const auto& sink : {alices, bobs, anyones}) {
    EXPECT_EQ(sink->terminal().finish_reason(), v1::FINISH_REASON_ABORT);
  }
  EXPECT_EQ(drained, 1);
}

TEST_F(PipelineCoreTest, EachIdentityHasItsOwnInFlightCap) {
  PipelineConfig config = OmniConfig(Shape());
  config.max_in_flight_per_identity = 2;
  Build(std::move(config));
  auto a1 = Gen("a1", {v1::MODALITY_TEXT}, "alice");
  auto a2 = Gen("a2", {v1::MODALITY_TEXT}, "alice");
  auto a3 = Gen("a3", {v1::MODALITY_TEXT}, "alice");
  EXPECT_EQ(a3->fail_status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(a3->fail_status().message(),
            "'alice' has 2 requests in flight; limits.max_in_flight_per_identity is 2; retry "
            "after 1000 ms");
  EXPECT_EQ(RetryAfterOf(a3->fail_status()), absl::Seconds(1));
  // Bob is not held back by alice, nor alice's requests by the refusal.
  auto b1 = Gen("b1", {v1::MODALITY_TEXT}, "bob");
  EXPECT_EQ(b1->end_count(), 0);
  EXPECT_EQ(a1->end_count() + a2->end_count(), 0);
  auto u1 = Gen("u1", {v1::MODALITY_TEXT});
  auto u2 = Gen("u2", {v1::MODALITY_TEXT});
  auto u3 = Gen("u3", {v1::MODALITY_TEXT});
  EXPECT_EQ(u3->fail_status().message(),
            "the unauthenticated clients have 2 requests in flight; "
            "limits.max_in_flight_per_identity is 2; retry after 1000 ms");
  // One of alice's ends: she may start another.
  Done(0, 0, "a1", {Text("ok")});
  auto a4 = Gen("a4", {v1::MODALITY_TEXT}, "alice");
  EXPECT_EQ(a4->end_count(), 0);
  for (const char* id : {"a2", "a4", "b1", "u1", "u2"}) Done(0, 0, id, {Text("ok")});
}

TEST_F(PipelineCoreTest, GeneratedIdsAreRandom) {
  Build(Shape{});
  std::set<std::string> ids;
  for (int i = 0; i < 20; ++i) {
    auto sink = Gen("", {v1::MODALITY_TEXT});
    ASSERT_EQ(log_.size(), 1u);
    // "T0.add req-<32 hex digits>"
    const std::string id = log_.back().substr(log_.back().find(' ') + 1);
    ClearLog();
    EXPECT_EQ(id.size(), 4u + 32u) << id;
    EXPECT_EQ(id.rfind("req-", 0), 0u) << id;
    EXPECT_EQ(id.find_first_not_of("0123456789abcdef", 4), std::string::npos) << id;
    EXPECT_TRUE(ids.insert(id).second) << id;
    Done(0, 0, id, {Text("ok")});
    EXPECT_EQ(sink->terminal_id(), id);
  }
}

}  // namespace
}  // namespace pipeline_core_test
}  // namespace omnistage
