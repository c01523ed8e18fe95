#include "orchestrator/core/output_fold.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace omnistage {
namespace {

using ::testing::ElementsAre;

v1::Payload Tokens(std::vector<int> ids) {
  v1::Payload p;
  for (int id : ids) p.mutable_tokens()->add_ids(id);
  return p;
}
v1::Payload Text(const std::string& text) {
  v1::Payload p;
  p.mutable_text()->set_text(text);
  return p;
}
v1::Payload Raw(const std::string& bytes) {
  v1::Payload p;
  p.set_raw(bytes);
  return p;
}

v1::RequestOutput& Add(v1::StepOutputs& step, const std::string& id,
                       std::vector<v1::Payload> payloads) {
  v1::RequestOutput& output = *step.add_outputs();
  output.set_request_id(id);
  for (v1::Payload& p : payloads) *output.add_payloads() = std::move(p);
  return output;
}

// "id: payload|payload [finished REASON]" per output.
std::vector<std::string> Describe(const v1::StepOutputs& step) {
  std::vector<std::string> out;
  for (const v1::RequestOutput& o : step.outputs()) {
    std::vector<std::string> parts;
    for (const v1::Payload& p : o.payloads()) {
      if (p.has_tokens()) parts.push_back(absl::StrJoin(p.tokens().ids(), ","));
      if (p.has_text()) parts.push_back("'" + p.text().text() + "'");
      if (p.has_raw()) parts.push_back("raw " + p.raw());
    }
    std::string line = absl::StrCat(o.request_id(), ": ", absl::StrJoin(parts, "|"));
    if (o.finished()) {
      absl::StrAppend(&line, " finished ", v1::FinishReason_Name(o.finish_reason()));
      if (!o.error().message().empty()) absl::StrAppend(&line, " (", o.error().message(), ")");
    }
    out.push_back(line);
  }
  return out;
}

TEST(FoldOutputsTest, OneOutputPerRequestWithItsPayloadsInOrder) {
  v1::StepOutputs step;
  Add(step, "a", {Tokens({1})});
  Add(step, "b", {Text("he")});
  Add(step, "a", {Tokens({2, 3})});
  Add(step, "b", {Text("llo")});
  Add(step, "a", {Raw("x"), Tokens({4})});
  Add(step, "c", {});
  Add(step, "a", {Tokens({5})}).set_finished(true);
  step.mutable_outputs(6)->set_finish_reason(v1::FINISH_REASON_STOP);
  FoldOutputs(&step);
  EXPECT_THAT(Describe(step),
              ElementsAre("a: 1,2,3|raw x|4,5 finished FINISH_REASON_STOP", "b: 'hello'", "c: "));
}

TEST(FoldOutputsTest, TheFinishAndItsErrorLandOnTheFoldedOutput) {
  v1::StepOutputs step;
  Add(step, "a", {Tokens({1})});
  v1::RequestOutput& last = Add(step, "a", {});
  last.set_finished(true);
  last.set_finish_reason(v1::FINISH_REASON_ERROR);
  last.mutable_error()->set_message("bad voice");
  FoldOutputs(&step);
  EXPECT_THAT(Describe(step), ElementsAre("a: 1 finished FINISH_REASON_ERROR (bad voice)"));
}

TEST(FoldOutputsTest, NothingJoinsAFinishedOutput) {
  v1::StepOutputs step;
  Add(step, "a", {Tokens({1})}).set_finished(true);
  Add(step, "a", {Tokens({2})});
  Add(step, "a", {Tokens({3})});
  FoldOutputs(&step);
  EXPECT_THAT(Describe(step), ElementsAre("a: 1 finished FINISH_REASON_UNSPECIFIED", "a: 2,3"));
}

TEST(FoldOutputsTest, AudioStaysInItsOwnPayloads) {
  v1::StepOutputs step;
  v1::Payload audio;
  audio.mutable_audio()->set_pcm_s16le("ab");
  Add(step, "a", {audio});
  Add(step, "a", {audio});
  FoldOutputs(&step);
  ASSERT_EQ(step.outputs_size(), 1);
  EXPECT_EQ(step.outputs(0).payloads_size(), 2);
}

TEST(FoldOutputsTest, ManyRequestsOverManySteps) {
  v1::StepOutputs step;
  for (int s = 0; s < 50; ++s) {
    for (int r = 0; r < 64; ++r) Add(step, absl::StrCat("req-", r), {Tokens({s})});
  }
  FoldOutputs(&step);
  ASSERT_EQ(step.outputs_size(), 64);
  for (int r = 0; r < 64; ++r) {
    EXPECT_EQ(step.outputs(r).request_id(), absl::StrCat("req-", r));
    ASSERT_EQ(step.outputs(r).payloads_size(), 1);
    ASSERT_EQ(step.outputs(r).payloads(0).tokens().ids_size(), 50);
    EXPECT_EQ(step.outputs(r).payloads(0).tokens().ids(49), 49);
  }
}

}  // namespace
}  // namespace omnistage
