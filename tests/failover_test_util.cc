#include "tests/failover_test_util.h"

#include <algorithm>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/pipeline_test_util.h"

namespace omnistage {
namespace {

uint64_t SeedOf(int n) { return 0x5eed0000u + static_cast<uint64_t>(n) * 7919; }

// The first offset where `a` and `b` differ (the shorter one's size when one
// is a prefix of the other): where a replay repeated or lost content.
template <typename Sequence>
size_t FirstDifference(const Sequence& a, const Sequence& b) {
  const size_t n = std::min(a.size(), b.size());
  return static_cast<size_t>(std::mismatch(a.begin(), a.begin() + n, b.begin()).first - a.begin());
}

}  // namespace

v1::StageParameters SeededParams(int stage, uint64_t seed, std::optional<uint32_t> max_tokens) {
  v1::StageParameters params;
  params.set_stage_id(stage);
  params.set_seed(seed);
  if (max_tokens.has_value()) params.set_max_tokens(*max_tokens);
  return params;
}

v1::GenerateRequest SeededOmniRequest(const std::string& id, int n, int sentences) {
  v1::StageParameters thinker = SeededParams(0, SeedOf(n), 1000);
  (*thinker.mutable_extra())["sentences"] = absl::StrCat(sentences);
  return MakeRequest(id, absl::StrCat("Tell me story number ", n, "."),
                     {thinker, SeededParams(1, SeedOf(n) + 1), SeededParams(2, SeedOf(n) + 2)});
}

v1::GenerateRequest SeededSimRequest(const std::string& id, int n,
                                     const std::vector<uint32_t>& tokens) {
  std::vector<v1::StageParameters> params;
  for (size_t s = 0; s < tokens.size(); ++s) {
    params.push_back(SeededParams(static_cast<int>(s), SeedOf(n) + s, tokens[s]));
  }
  return MakeRequest(id, absl::StrCat("prompt number ", n), std::move(params));
}

std::vector<v1::GenerateRequest> Renamed(std::vector<v1::GenerateRequest> requests,
                                         const std::string& prefix) {
  for (v1::GenerateRequest& request : requests) {
    request.set_request_id(absl::StrCat(prefix, request.request_id()));
  }
  return requests;
}

void ExpectSameContent(const GenerateResult& got, const GenerateResult& want) {
  ExpectOneTerminal(got);
  EXPECT_EQ(got.terminal.finish_reason(), want.terminal.finish_reason()) << got.Summary();
  EXPECT_TRUE(got.text == want.text)
      << got.request_id << ": text of " << got.text.size() << " bytes, fault-free "
      << want.text.size() << ", first difference at byte " << FirstDifference(got.text, want.text);
  EXPECT_TRUE(got.audio == want.audio)
      << got.request_id << ": audio of " << got.audio.size() << " bytes, fault-free "
      << want.audio.size() << ", first difference at byte "
      << FirstDifference(got.audio, want.audio);
  EXPECT_TRUE(got.tokens == want.tokens)
      << got.request_id << ": " << got.tokens.size() << " tokens, fault-free "
      << want.tokens.size() << ", first difference at token "
      << FirstDifference(got.tokens, want.tokens);
}

std::vector<GenerateResult> FaultFreeRun(PipelineHarness& pipeline,
                                         const std::vector<v1::GenerateRequest>& requests) {
  std::vector<GenerateResult> results = pipeline.GenerateAll(requests, absl::Seconds(90));
  for (const GenerateResult& r : results) {
    ExpectOneTerminal(r);
    EXPECT_TRUE(r.terminal.finish_reason() == v1::FINISH_REASON_LENGTH ||
                r.terminal.finish_reason() == v1::FINISH_REASON_STOP)
        << "the fault-free run failed: " << r.Summary();
  }
  return results;
}

std::vector<GenerateResult> RunWithFault(PipelineHarness& pipeline,
                                         const std::vector<v1::GenerateRequest>& requests,
                                         const std::function<bool(const GenerateResult&)>& started,
                                         const std::function<void()>& fault) {
  std::vector<std::unique_ptr<GenerateCall>> calls;
  for (const v1::GenerateRequest& request : requests) {
    calls.push_back(pipeline.StartGenerate(request, absl::Seconds(120)));
  }
  for (auto& call : calls) {
    EXPECT_TRUE(call->WaitUntil(started, absl::Seconds(60)))
        << "not under way before the fault: " << call->Snapshot().Summary();
  }
  fault();
  std::vector<GenerateResult> results;
  for (auto& call : calls) {
    results.push_back(call->Wait(absl::Seconds(90)));
    EXPECT_TRUE(results.back().done) << "hangs: " << results.back().Summary();
  }
  return results;
}

std::vector<PlacedCall> StartPlaced(PipelineHarness& pipeline,
                                    const std::vector<v1::GenerateRequest>& requests) {
  std::vector<int> before(pipeline.replicas(0), 0);
  std::vector<PlacedCall> placed;
  for (const v1::GenerateRequest& request : requests) {
    PlacedCall& p = placed.emplace_back();
    p.call = pipeline.StartGenerate(request, absl::Seconds(120));
    std::vector<int> now = before;
    const int want = std::accumulate(before.begin(), before.end(), 0) + 1;
    const bool bound = Eventually(
        [&] {
          absl::StatusOr<v1::PipelineStatus> status = pipeline.Status();
          if (!status.ok()) return false;
          for (int r = 0; r < pipeline.replicas(0); ++r) now[r] = BoundRequests(*status, 0, r);
          return std::accumulate(now.begin(), now.end(), 0) == want;
        },
        absl::Seconds(20));
    EXPECT_TRUE(bound) << request.request_id() << " was not bound alone (did one end early?)";
    for (int r = 0; r < pipeline.replicas(0); ++r) {
      if (now[r] > before[r]) p.replica = r;
    }
    before = now;
  }
  return placed;
}

int BoundTo(PipelineHarness& pipeline, int stage, int replica) {
  absl::StatusOr<v1::PipelineStatus> status = pipeline.Status();
  EXPECT_TRUE(status.ok()) << status.status();
  return status.ok() ? BoundRequests(*status, stage, replica) : -1;
}

bool HasAudio(const GenerateResult& r) { return !r.audio.empty(); }
bool HasOutput(const GenerateResult& r) { return r.output_chunks > 0; }

}  // namespace omnistage
