#include "tests/steady_load.h"

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/pipeline_test_util.h"

namespace omnistage {

v1::GenerateRequest SteadyLoad::ShapeRequest(const std::string& id, int shape) {
  return MakeRequest(id, absl::StrCat("shape number ", shape), {StageParams(0, 20 + shape * 3)});
}

SteadyLoad::SteadyLoad(PipelineHarness* pipeline) : pipeline_(pipeline) {
  std::vector<v1::GenerateRequest> reference;
  for (int shape = 0; shape < kShapes; ++shape) {
    reference.push_back(ShapeRequest(absl::StrCat("ref-", shape), shape));
  }
  for (const GenerateResult& r : pipeline_->GenerateAll(reference)) {
    EXPECT_EQ(r.terminal.finish_reason(), v1::FINISH_REASON_LENGTH) << r.Summary();
    expected_.push_back(r.tokens);
  }
}

SteadyLoad::~SteadyLoad() { Stop(); }

void SteadyLoad::Start(int clients) {
  for (int c = 0; c < clients; ++c) {
    clients_.emplace_back([this, c] {
      for (int i = 0; !stop_; ++i) {
        const int shape = (c + i) % kShapes;
        GenerateResult r =
            pipeline_->Generate(ShapeRequest(absl::StrCat("c", c, "-", i), shape));
        absl::MutexLock lock(&mu_);
        results_.emplace_back(shape, std::move(r));
      }
    });
  }
}

void SteadyLoad::Stop() {
  stop_ = true;
  for (std::thread& t : clients_) t.join();
  clients_.clear();
}

int SteadyLoad::FinishAndCheck() {
  Stop();
  absl::MutexLock lock(&mu_);
  int identical = 0;
  for (const auto& [shape, r] : results_) {
    ExpectOneTerminal(r);
    EXPECT_EQ(r.terminal.finish_reason(), v1::FINISH_REASON_LENGTH) << r.Summary();
    EXPECT_EQ(r.tokens, expected_[shape]) << r.Summary();
    if (r.terminal.finish_reason() == v1::FINISH_REASON_LENGTH && r.tokens == expected_[shape]) {
      ++identical;
    }
  }
  return identical;
}

}  // namespace omnistage
