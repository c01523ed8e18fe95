// How a Python engine says whether it takes input in pieces: its class
// attribute `streamed_input` becomes Engine::streamed_input() ("whole" when
// absent), a value it cannot mean refuses the engine naming the class and the
// values it can, and the pieces reach the class's append_input in order.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/field_error.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "stage_worker/engines/registry.h"

namespace omnistage {
namespace {

using ::testing::HasSubstr;

// Bazel runs tests from the workspace root of the runfiles.
constexpr char kPath[] = "stage_worker/engines/python:stage_worker/engines/python/testdata";

absl::StatusOr<std::unique_ptr<Engine>> Python(const std::string& module,
                                               const std::string& cls) {
  return CreateEngine("python", {{"path", kPath}, {"module", module}, {"class", cls}});
}

v1::Payload Text(const std::string& text) {
  v1::Payload payload;
  payload.mutable_text()->set_text(text);
  return payload;
}

TEST(PythonEngineStreamedTest, TheClassAttributeSaysHowItTakesInput) {
  const std::map<std::string, StreamedInput> expected = {
      {"Echo", StreamedInput::kWhole},  // no attribute
      {"Incremental", StreamedInput::kIncremental},
      {"Unstreamed", StreamedInput::kNone},
  };
  for (const auto& [cls, streamed] : expected) {
    absl::StatusOr<std::unique_ptr<Engine>> engine = Python("test_engines", cls);
    ASSERT_TRUE(engine.ok()) << engine.status();
    EXPECT_EQ((*engine)->streamed_input(), streamed) << cls;
  }
  // The shipped sim_llm prefills its whole prompt, as the C++ one does.
  absl::StatusOr<std::unique_ptr<Engine>> sim_llm = Python("omnistage_engines.sim_llm", "SimLlm");
  ASSERT_TRUE(sim_llm.ok()) << sim_llm.status();
  EXPECT_EQ((*sim_llm)->streamed_input(), StreamedInput::kWhole);
}

// A misspelt value must not pass for "whole": a stage 0 would then take a
// GenerateDuplex its engine was never written for, or refuse one it takes.
TEST(PythonEngineStreamedTest, AnyOtherValueRefusesTheEngineNamingClassAndValues) {
  absl::Status refused = Python("test_engines", "BadStreamedInput").status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ErrorField(refused), "engine_params.class");
  EXPECT_THAT(refused.message(),
              HasSubstr("class test_engines.BadStreamedInput.streamed_input is 'pieces'"));
  EXPECT_THAT(refused.message(), HasSubstr("expected \"whole\", \"incremental\" or \"none\""));
}

TEST(PythonEngineStreamedTest, PiecesReachAppendInputInOrder) {
  absl::StatusOr<std::unique_ptr<Engine>> engine = Python("test_engines", "Incremental");
  ASSERT_TRUE(engine.ok()) << engine.status();
  EngineRequest request;
  request.id = "r";
  request.input.push_back(Text("one "));
  request.input_complete = false;
  ASSERT_TRUE((*engine)->Validate(request).ok());
  ASSERT_TRUE((*engine)->ValidateInLoop(request).ok());
  ASSERT_TRUE((*engine)->Add(std::move(request)).ok());
  ASSERT_TRUE((*engine)->AppendInput("r", {Text("two ")}, /*last=*/false).ok());
  ASSERT_TRUE((*engine)->AppendInput("r", {Text("three")}, /*last=*/true).ok());
  absl::StatusOr<std::vector<v1::RequestOutput>> outputs = (*engine)->Step();
  ASSERT_TRUE(outputs.ok()) << outputs.status();
  ASSERT_EQ(outputs->size(), 1u);
  ASSERT_GE((*outputs)[0].payloads_size(), 1);
  EXPECT_EQ((*outputs)[0].payloads(0).text().text(), "one two three");
  EXPECT_TRUE((*outputs)[0].finished());
}

}  // namespace
}  // namespace omnistage
