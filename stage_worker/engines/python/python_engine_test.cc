// The python engine adapter: start-up refusals naming module, class and
// method; payload and value conversions; each method's errors (validate:
// that request; utility: that call; the rest: fatal, with the traceback); the
// registry's fault hooks around a Python engine; and the Python sim_llm port
// against the C++ sim_llm, output for output.
#include "stage_worker/engines/python/python_engine.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/field_error.h"
#include "common/production_stamp.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "stage_worker/engines/registry.h"

namespace omnistage {
namespace {

using ::testing::HasSubstr;

// Bazel runs tests from the workspace root of the runfiles.
constexpr char kPath[] = "stage_worker/engines/python:stage_worker/engines/python/testdata";

absl::StatusOr<std::unique_ptr<Engine>> Python(const std::string& module, const std::string& cls,
                                               std::map<std::string, std::string> params = {}) {
  params["path"] = kPath;
  if (!module.empty()) params["module"] = module;
  if (!cls.empty()) params["class"] = cls;
  return CreateEngine("python", params);
}

std::unique_ptr<Engine> Echo(std::map<std::string, std::string> params = {}) {
  absl::StatusOr<std::unique_ptr<Engine>> engine = Python("test_engines", "Echo", params);
  EXPECT_TRUE(engine.ok()) << engine.status();
  return engine.ok() ? *std::move(engine) : nullptr;
}

EngineRequest TextRequest(std::string id, std::string text, bool complete = true) {
  EngineRequest request;
  request.id = std::move(id);
  request.input.emplace_back().mutable_text()->set_text(std::move(text));
  request.input_complete = complete;
  return request;
}

// Validates in the loop and adds, as the busy loop does.
absl::Status Submit(Engine& engine, EngineRequest request) {
  if (absl::Status s = engine.Validate(request); !s.ok()) return s;
  if (absl::Status s = engine.ValidateInLoop(request); !s.ok()) return s;
  return engine.Add(std::move(request));
}

TEST(PythonEngineTest, StartUpRefusalsNameModuleClassAndMethod) {
  absl::StatusOr<std::unique_ptr<Engine>> engine = Python("", "Echo");
  EXPECT_EQ(ErrorField(engine.status()), "engine_params.module");
  EXPECT_THAT(engine.status().message(), HasSubstr("parameter 'module' is required"));

  engine = Python("no_such_module", "Echo");
  EXPECT_EQ(engine.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ErrorField(engine.status()), "engine_params.module");
  EXPECT_THAT(engine.status().message(),
              HasSubstr("cannot import module 'no_such_module': ModuleNotFoundError"));

  engine = Python("test_engines", "Missing");
  EXPECT_EQ(ErrorField(engine.status()), "engine_params.class");
  EXPECT_THAT(engine.status().message(), HasSubstr("module 'test_engines' has no class 'Missing'"));

  engine = Python("test_engines", "NoStep");
  EXPECT_EQ(ErrorField(engine.status()), "engine_params.class");
  EXPECT_THAT(engine.status().message(),
              HasSubstr("class test_engines.NoStep has no method 'step'"));

  engine = Python("test_engines", "Echo", {{"colour", "red"}});
  EXPECT_EQ(ErrorField(engine.status()), "engine_params.colour");
  EXPECT_THAT(engine.status().message(),
              HasSubstr("test_engines.Echo(params) raised ParamError: engine echo: unknown "
                        "parameter 'colour'"));

  engine = Python("test_engines", "BadCapacity");
  EXPECT_EQ(ErrorField(engine.status()), "engine_params.class");
  EXPECT_THAT(engine.status().message(), HasSubstr("capacity is 'lots'"));
}

TEST(PythonEngineTest, RunsTheClassAndConvertsEveryPayloadKind) {
  std::unique_ptr<Engine> engine = Echo();
  ASSERT_NE(engine, nullptr);
  EXPECT_EQ(engine->capacity(), 8);
  EXPECT_FALSE(engine->HasWork());
  ASSERT_TRUE(Submit(*engine, TextRequest("a", "hel", false)).ok());
  std::vector<v1::Payload> more(1);
  more[0].mutable_text()->set_text("lo");
  ASSERT_TRUE(engine->AppendInput("a", more, true).ok());
  EXPECT_TRUE(engine->HasWork());
  EXPECT_EQ(engine->load().running, 1);
  absl::StatusOr<std::vector<v1::RequestOutput>> outputs = engine->Step();
  ASSERT_TRUE(outputs.ok()) << outputs.status();
  ASSERT_EQ(outputs->size(), 1u);
  const v1::RequestOutput& out = (*outputs)[0];
  EXPECT_EQ(out.request_id(), "a");
  EXPECT_TRUE(out.finished());
  EXPECT_EQ(out.finish_reason(), v1::FINISH_REASON_STOP);
  ASSERT_EQ(out.payloads_size(), 4);
  EXPECT_EQ(out.payloads(0).text().text(), "hello");
  ASSERT_EQ(out.payloads(1).tokens().ids_size(), 1);
  EXPECT_EQ(out.payloads(1).tokens().ids(0), 5);
  EXPECT_EQ(out.payloads(2).raw(), "hello");
  EXPECT_EQ(out.payloads(3).audio().pcm_s16le(), std::string("\x01\x00", 2));
  EXPECT_EQ(out.payloads(3).audio().sample_rate_hz(), 24000);
  EXPECT_EQ(engine->load().running, 0);  // Echo has no load(): the worker's count
  EXPECT_FALSE(engine->HasWork());
}

TEST(PythonEngineTest, ValidateRejectsThatRequestWithItsMessageAndField) {
  std::unique_ptr<Engine> engine = Echo();
  ASSERT_NE(engine, nullptr);
  EngineRequest request = TextRequest("a", "x");
  (*request.params.mutable_extra())["reject"] = "no";
  absl::Status status = Submit(*engine, request);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "refused: no");
  EXPECT_EQ(ErrorField(status), "params.extra.reject");
  EXPECT_FALSE(engine->HasWork());                           // never added
  ASSERT_TRUE(Submit(*engine, TextRequest("b", "y")).ok());  // the next one is fine

  // What needs no interpreter is checked on the caller's thread.
  EngineRequest empty;
  empty.id = "c";
  empty.input.emplace_back();
  EXPECT_EQ(ErrorField(engine->Validate(empty)), "input[0]");
}

TEST(PythonEngineTest, ExceptionsFromTheLoopsMethodsAreFatalWithTheirTraceback) {
  for (const std::string method : {"add", "append_input", "step"}) {
    SCOPED_TRACE(method);
    std::unique_ptr<Engine> engine = Echo({{"raise_in", method}});
    ASSERT_NE(engine, nullptr);
    absl::Status status = Submit(*engine, TextRequest("a", "x", method != "add"));
    if (status.ok() && method == "append_input") status = engine->AppendInput("a", {}, true);
    if (status.ok() && method == "step") status = engine->Step().status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInternal);
    EXPECT_THAT(status.message(),
                HasSubstr(absl::StrCat("python engine test_engines.Echo: ", method,
                                       " raised ValueError: boom in ", method)));
    EXPECT_THAT(status.message(), HasSubstr("Traceback (most recent call last)"));
    EXPECT_THAT(status.message(), HasSubstr("in explode"));
  }
  // abort and has_work cannot return an error: the next step does.
  for (const std::string method : {"abort", "has_work"}) {
    SCOPED_TRACE(method);
    std::unique_ptr<Engine> engine = Echo({{"raise_in", method}});
    ASSERT_NE(engine, nullptr);
    if (method == "abort") engine->Abort({"a"});
    EXPECT_TRUE(engine->HasWork());
    absl::Status status = engine->Step().status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInternal);
    EXPECT_THAT(status.message(), HasSubstr(absl::StrCat(method, " raised ValueError")));
  }
}

TEST(PythonEngineTest, MalformedStepOutputIsFatalAndSaysWhatIsWrong) {
  const std::map<std::string, std::string> cases = {
      {"not_a_list", "returned a int, not a list of outputs"},
      {"bad_payload", "output for 'a': a payload is a float"},
      {"bad_finish", "finish is 'done'"},
  };
  for (const auto& [output, expected] : cases) {
    SCOPED_TRACE(output);
    std::unique_ptr<Engine> engine = Echo({{"output", output}});
    ASSERT_NE(engine, nullptr);
    ASSERT_TRUE(Submit(*engine, TextRequest("a", "x")).ok());
    absl::Status status = engine->Step().status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInternal);
    EXPECT_THAT(status.message(), HasSubstr(expected));
  }
}

TEST(PythonEngineTest, UtilityErrorsFailOnlyThatCall) {
  std::unique_ptr<Engine> engine = Echo();
  ASSERT_NE(engine, nullptr);
  google::protobuf::ListValue args;
  args.add_values()->set_number_value(2);
  args.add_values()->set_string_value("s");
  args.add_values()->mutable_struct_value()->mutable_fields()->operator[]("k").set_bool_value(true);
  args.add_values()->mutable_list_value()->add_values()->set_null_value(
      google::protobuf::NULL_VALUE);
  absl::StatusOr<google::protobuf::Value> echoed = engine->Utility("echo", args);
  ASSERT_TRUE(echoed.ok()) << echoed.status();
  EXPECT_EQ(echoed->list_value().DebugString(), args.DebugString());

  EXPECT_EQ(engine->Utility("nope", {}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(engine->Utility("nope", {}).status().message(), "unknown utility 'nope'");
  EXPECT_EQ(engine->Utility("unimplemented", {}).status().code(), absl::StatusCode::kUnimplemented);
  absl::Status runtime = engine->Utility("runtime", {}).status();
  EXPECT_EQ(runtime.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(runtime.message(), HasSubstr("raised RuntimeError: it broke"));
  absl::Status not_json = engine->Utility("not_json", {}).status();
  EXPECT_EQ(not_json.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(not_json.message(), HasSubstr("returned a object"));
  // The engine goes on.
  ASSERT_TRUE(Submit(*engine, TextRequest("a", "x")).ok());
  EXPECT_TRUE(engine->Step().ok());
}

// Both engines get the same requests and steps; every step's outputs match.
void ExpectSameAsCpp(const std::map<std::string, std::string>& params) {
  absl::StatusOr<std::unique_ptr<Engine>> cpp = CreateEngine("sim_llm", params);
  std::map<std::string, std::string> python_params = params;
  python_params["module"] = "omnistage_engines.sim_llm";
  python_params["class"] = "SimLlm";
  absl::StatusOr<std::unique_ptr<Engine>> py =
      Python("omnistage_engines.sim_llm", "SimLlm", python_params);
  ASSERT_TRUE(cpp.ok()) << cpp.status();
  ASSERT_TRUE(py.ok()) << py.status();
  std::vector<EngineRequest> requests;
  for (int i = 0; i < 5; ++i) {
    EngineRequest request = TextRequest(absl::StrCat("r", i), absl::StrCat("prompt ", i), i != 3);
    request.input.emplace_back().mutable_tokens()->add_ids(i * 7);
    request.params.set_max_tokens(3 + i);
    if (i % 2 == 0) request.params.set_seed(1000 + i);
    requests.push_back(request);
  }
  for (Engine* engine : {cpp->get(), py->get()}) {
    for (const EngineRequest& request : requests) ASSERT_TRUE(Submit(*engine, request).ok());
  }
  for (int step = 1; step < 20; ++step) {
    SCOPED_TRACE(step);
    if (step == 1) {
      // r0 far ahead of its listener (it sits out with playback_lead_ms), r4
      // playing (a free slot goes to r2, not playing yet, first).
      for (Engine* engine : {cpp->get(), py->get()}) {
        engine->SetPlaybackDeadline("r0", absl::Now() + absl::Seconds(60));
        engine->SetPlaybackDeadline("r4", absl::Now() + absl::Seconds(30));
      }
    }
    if (step == 4) {
      std::vector<v1::Payload> rest(1);
      rest[0].mutable_text()->set_text(" and the rest");
      ASSERT_TRUE((*cpp)->AppendInput("r3", rest, true).ok());
      ASSERT_TRUE((*py)->AppendInput("r3", rest, true).ok());
    }
    if (step == 2) {
      (*cpp)->Abort({"r1"});
      (*py)->Abort({"r1"});
    }
    ASSERT_EQ((*cpp)->HasWork(), (*py)->HasWork());
    if (!(*cpp)->HasWork()) break;
    absl::StatusOr<std::vector<v1::RequestOutput>> a = (*cpp)->Step();
    absl::StatusOr<std::vector<v1::RequestOutput>> b = (*py)->Step();
    ASSERT_TRUE(a.ok() && b.ok()) << a.status() << " " << b.status();
    ASSERT_EQ(a->size(), b->size());
    for (size_t i = 0; i < a->size(); ++i) EXPECT_EQ((*a)[i].DebugString(), (*b)[i].DebugString());
    EXPECT_EQ((*cpp)->load().running, (*py)->load().running);
    EXPECT_EQ((*cpp)->load().waiting, (*py)->load().waiting);
  }
  EXPECT_FALSE((*py)->HasWork());
  google::protobuf::ListValue none;
  absl::StatusOr<google::protobuf::Value> a = (*cpp)->Utility("stats", none);
  absl::StatusOr<google::protobuf::Value> b = (*py)->Utility("stats", none);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->DebugString(), b->DebugString());
}

TEST(PythonEngineTest, SimLlmPortMatchesTheCppEngineTokenForToken) {
  ExpectSameAsCpp({{"batch_size", "2"}});
  ExpectSameAsCpp({{"batch_size", "3"}, {"output", "text"}, {"vocab_size", "500"}});
  ExpectSameAsCpp({{"batch_size", "2"}, {"playback_lead_ms", "2000"}});
  ExpectSameAsCpp({{"batch_size", "2"}, {"later_piece_steps", "3"}});
}

// The fault hooks wrap a Python engine as any other: Echo, which refuses every
// parameter it does not know, never sees theirs.
TEST(PythonEngineTest, FaultHooksWrapThePythonEngine) {
  std::unique_ptr<Engine> engine = Echo({{"fail_at_step", "2"}, {"test_utilities", "true"}});
  ASSERT_NE(engine, nullptr);
  absl::StatusOr<google::protobuf::Value> div = engine->Utility("div", [] {
    google::protobuf::ListValue args;
    args.add_values()->set_number_value(1);
    args.add_values()->set_number_value(0);
    return args;
  }());
  EXPECT_EQ(div.status(),
            absl::InvalidArgumentError("engine python: utility div: division by zero"));
  EXPECT_EQ(engine->Utility("nope", {}).status().message(),
            "unknown utility 'nope'; also div (test_utilities)");
  EXPECT_EQ(engine->Utility("threads", {})->number_value(), 1);  // Echo's own
  ASSERT_TRUE(Submit(*engine, TextRequest("a", "x")).ok());
  EXPECT_TRUE(engine->Step().ok());
  EXPECT_EQ(engine->Step().status(),
            absl::InternalError("engine python: injected failure at step 2 (fail_at_step)"));

  absl::Status refused = Python("test_engines", "Echo", {{"fail_at_step", "x"}}).status();
  EXPECT_EQ(ErrorField(refused), "engine_params.fail_at_step");
  EXPECT_THAT(refused.message(), HasSubstr("engine python: parameter fail_at_step: expected an "
                                           "integer"));
}

TEST(PythonEngineTest, StampOutputsStampsAPythonEnginesOutputs) {
  absl::StatusOr<std::unique_ptr<Engine>> py =
      Python("omnistage_engines.sim_llm", "SimLlm", {{"stamp_outputs", "true"}});
  ASSERT_TRUE(py.ok()) << py.status();
  ASSERT_TRUE(Submit(**py, TextRequest("a", "x")).ok());
  const int64_t before = MonotonicNowNs();
  absl::StatusOr<std::vector<v1::RequestOutput>> outputs = (*py)->Step();
  const int64_t after = MonotonicNowNs();
  ASSERT_TRUE(outputs.ok()) << outputs.status();
  ASSERT_EQ(outputs->size(), 1u);
  ASSERT_EQ((*outputs)[0].payloads_size(), 2);
  std::optional<int64_t> stamp = StampOf((*outputs)[0].payloads(1));
  ASSERT_TRUE(stamp.has_value());
  EXPECT_GE(*stamp, before);
  EXPECT_LE(*stamp, after);
}

TEST(PythonEngineTest, SimLlmPortRefusesParametersAsTheCppEngineDoes) {
  for (const auto& [key, value] : std::map<std::string, std::string>{
           {"batch_size", "x"}, {"step_mode", "fast"}, {"bach_size", "4"}}) {
    absl::StatusOr<std::unique_ptr<Engine>> cpp = CreateEngine("sim_llm", {{key, value}});
    absl::StatusOr<std::unique_ptr<Engine>> py =
        Python("omnistage_engines.sim_llm", "SimLlm", {{key, value}});
    EXPECT_EQ(ErrorField(py.status()), ErrorField(cpp.status()));
    EXPECT_THAT(py.status().message(), HasSubstr(cpp.status().message()));
  }
  google::protobuf::ListValue none;
  EXPECT_EQ(Python("omnistage_engines.sim_llm", "SimLlm").value()->Utility("div", none).status(),
            CreateEngine("sim_llm", {}).value()->Utility("div", none).status());
}

}  // namespace
}  // namespace omnistage
