#include "common/tracing/sampler.h"

#include "gtest/gtest.h"

namespace omnistage {
namespace {

TEST(SamplerTest, TheDefaultFollowsTheParentAndSamplesNewTraces) {
  absl::StatusOr<Sampler> sampler = Sampler::Parse("", "");
  ASSERT_TRUE(sampler.ok());
  EXPECT_EQ(sampler->Describe(), "parentbased_always_on");
  const TraceContext root = TraceContext::NewRoot(0);
  EXPECT_TRUE(sampler->Sample(nullptr, root.trace_id));
  EXPECT_FALSE(sampler->Sample(&root, root.trace_id));
  const TraceContext sampled = TraceContext::NewRoot(TraceContext::kSampled);
  EXPECT_TRUE(sampler->Sample(&sampled, sampled.trace_id));
}

TEST(SamplerTest, ARatioSamplesThatShareOfTracesAlikeEverywhere) {
  absl::StatusOr<Sampler> sampler = Sampler::Parse("traceidratio", "0.25");
  ASSERT_TRUE(sampler.ok());
  int sampled = 0;
  constexpr int kTraces = 20000;
  for (int i = 0; i < kTraces; ++i) {
    const std::string id = RandomTraceBytes(16);
    const bool first = sampler->Sample(nullptr, id);
    EXPECT_EQ(sampler->Sample(nullptr, id), first);
    sampled += first;
  }
  EXPECT_NEAR(sampled / static_cast<double>(kTraces), 0.25, 0.02);
  // Not parent-based: the parent's flag does not matter.
  const TraceContext parent = TraceContext::NewRoot(TraceContext::kSampled);
  absl::StatusOr<Sampler> none = Sampler::Parse("traceidratio", "0");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->Sample(&parent, parent.trace_id));
}

TEST(SamplerTest, ParentBasedRatioDecidesOnlyNewTraces) {
  absl::StatusOr<Sampler> sampler = Sampler::Parse("ParentBased_TraceIdRatio", "0");
  ASSERT_TRUE(sampler.ok());
  const TraceContext parent = TraceContext::NewRoot(TraceContext::kSampled);
  EXPECT_TRUE(sampler->Sample(&parent, parent.trace_id));
  EXPECT_FALSE(sampler->Sample(nullptr, parent.trace_id));
  EXPECT_FALSE(Sampler::Parse("always_off", "")->Sample(nullptr, parent.trace_id));
  EXPECT_FALSE(Sampler::Parse("parentbased_always_off", "")->Sample(nullptr, parent.trace_id));
}

TEST(SamplerTest, BadSettingsAreRefusedWithWhatIsAllowed) {
  absl::StatusOr<Sampler> unknown = Sampler::Parse("sometimes", "");
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(unknown.status().message().find("parentbased_traceidratio"), std::string::npos);
  EXPECT_FALSE(Sampler::Parse("traceidratio", "1.5").ok());
  EXPECT_FALSE(Sampler::Parse("traceidratio", "half").ok());
  EXPECT_FALSE(Sampler::Parse("traceidratio", "-0.1").ok());
}

}  // namespace
}  // namespace omnistage
