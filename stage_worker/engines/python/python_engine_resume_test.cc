// How a Python engine takes over a request another replica lost: its class
// attribute `resume` becomes Engine::resume_mode() (a value it cannot mean
// refuses the engine, naming the class and the values it can), and a
// continuation engine finds what the request already produced in
// params["produced"] and continues after it.
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

using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;

// Bazel runs tests from the workspace root of the runfiles.
constexpr char kPath[] = "stage_worker/engines/python:stage_worker/engines/python/testdata";

absl::StatusOr<std::unique_ptr<Engine>> Python(const std::string& module,
                                               const std::string& cls) {
  return CreateEngine("python", {{"path", kPath}, {"module", module}, {"class", cls}});
}

// A request for the test engine Continuing: `produced` tokens, when given, as
// the one token payload the worker hands a continuation.
EngineRequest Request(std::string id, uint32_t max_tokens, std::vector<int32_t> produced = {}) {
  EngineRequest request;
  request.id = std::move(id);
  request.input.emplace_back().mutable_text()->set_text("once upon a time");
  request.params.set_max_tokens(max_tokens);
  request.params.set_seed(42);
  if (!produced.empty()) {
    request.produced.emplace_back().mutable_tokens()->mutable_ids()->Add(produced.begin(),
                                                                         produced.end());
  }
  return request;
}

// Validates in the loop and adds, as the busy loop does.
absl::Status Submit(Engine& engine, EngineRequest request) {
  if (absl::Status s = engine.Validate(request); !s.ok()) return s;
  if (absl::Status s = engine.ValidateInLoop(request); !s.ok()) return s;
  return engine.Add(std::move(request));
}

struct Produced {
  std::vector<int32_t> tokens;
  v1::FinishReason finish_reason = v1::FINISH_REASON_UNSPECIFIED;
};

// Steps `engine` until it has no work; what request `id` produced.
Produced RunAll(Engine& engine, const std::string& id) {
  Produced run;
  for (int i = 0; i < 1000 && engine.HasWork(); ++i) {
    absl::StatusOr<std::vector<v1::RequestOutput>> outputs = engine.Step();
    EXPECT_TRUE(outputs.ok()) << outputs.status();
    if (!outputs.ok()) break;
    for (const v1::RequestOutput& output : *outputs) {
      if (output.request_id() != id) continue;
      for (const v1::Payload& payload : output.payloads()) {
        run.tokens.insert(run.tokens.end(), payload.tokens().ids().begin(),
                          payload.tokens().ids().end());
      }
      if (output.finished()) run.finish_reason = output.finish_reason();
    }
  }
  return run;
}

TEST(PythonEngineResumeTest, TheClassAttributeSaysHowItResumes) {
  const std::map<std::string, ResumeMode> expected = {
      {"Echo", ResumeMode::kNone},  // no attribute
      {"Continuing", ResumeMode::kContinuation},
  };
  for (const auto& [cls, mode] : expected) {
    absl::StatusOr<std::unique_ptr<Engine>> engine = Python("test_engines", cls);
    ASSERT_TRUE(engine.ok()) << engine.status();
    EXPECT_EQ((*engine)->resume_mode(), mode) << cls;
  }
  absl::StatusOr<std::unique_ptr<Engine>> sim_llm = Python("omnistage_engines.sim_llm", "SimLlm");
  ASSERT_TRUE(sim_llm.ok()) << sim_llm.status();
  EXPECT_EQ((*sim_llm)->resume_mode(), ResumeMode::kReplay);
}

// A misspelt promise must not pass for "cannot resume": the worker would start
// and fail every failover of the stage without saying why.
TEST(PythonEngineResumeTest, AnyOtherValueRefusesTheEngineNamingClassAndValues) {
  absl::Status refused = Python("test_engines", "BadResume").status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ErrorField(refused), "engine_params.class");
  EXPECT_THAT(refused.message(), HasSubstr("class test_engines.BadResume.resume is 'rerun'"));
  EXPECT_THAT(refused.message(), HasSubstr("expected \"replay\" or \"continuation\""));
}

TEST(PythonEngineResumeTest, AContinuationContinuesAfterWhatWasProduced) {
  absl::StatusOr<std::unique_ptr<Engine>> engine = Python("test_engines", "Continuing");
  ASSERT_TRUE(engine.ok()) << engine.status();
  ASSERT_TRUE(Submit(**engine, Request("whole", 10)).ok());
  const Produced whole = RunAll(**engine, "whole");
  ASSERT_THAT(whole.tokens, SizeIs(10));
  EXPECT_EQ(whole.finish_reason, v1::FINISH_REASON_LENGTH);

  const std::vector<int32_t> first(whole.tokens.begin(), whole.tokens.begin() + 4);
  ASSERT_TRUE(Submit(**engine, Request("resumed", 10, first)).ok());
  const Produced rest = RunAll(**engine, "resumed");
  EXPECT_THAT(rest.tokens, ElementsAreArray(whole.tokens.begin() + 4, whole.tokens.end()));
  EXPECT_EQ(rest.finish_reason, v1::FINISH_REASON_LENGTH);

  // Lost right after its last token, before it was told finished.
  ASSERT_TRUE(Submit(**engine, Request("done", 10, whole.tokens)).ok());
  const Produced nothing = RunAll(**engine, "done");
  EXPECT_THAT(nothing.tokens, IsEmpty());
  EXPECT_EQ(nothing.finish_reason, v1::FINISH_REASON_LENGTH);
}

TEST(PythonEngineResumeTest, ProducedIsCheckedLikeInput) {
  absl::StatusOr<std::unique_ptr<Engine>> engine = Python("test_engines", "Continuing");
  ASSERT_TRUE(engine.ok()) << engine.status();
  // No Python value stands for a payload without a kind: refused on the gRPC
  // thread already.
  EngineRequest empty = Request("a", 4);
  empty.produced.emplace_back();
  EXPECT_EQ(ErrorField((*engine)->Validate(empty)), "produced[0]");
  // The class's own validate sees produced too, and names the field.
  EngineRequest text = Request("b", 4);
  text.produced.emplace_back().mutable_text()->set_text("words");
  ASSERT_TRUE((*engine)->Validate(text).ok());
  absl::Status refused = (*engine)->ValidateInLoop(text);
  EXPECT_EQ(ErrorField(refused), "produced[0]");
  EXPECT_THAT(refused.message(), HasSubstr("it produces tokens only"));
}

}  // namespace
}  // namespace omnistage
