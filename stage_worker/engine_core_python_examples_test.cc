// The busy loop's worked examples 1-3 (docs/architecture.md; engine_core_examples_test.cc
// runs them on the toy engine) on sim_llm's Python port through the python engine: the
// loop's FIFO order, utility errors per call, a fatal step, blocking when idle
// and a wakeable shutdown hold for a Python engine. A request's max_tokens is
// its step count, as in the toy engine. The examples' utility div is the
// registry's test utility (test_utilities, around the Python engine); the fatal
// step is an exception raised in Python (test_engines.FaultySimLlm).
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "stage_worker/engine_core.h"
#include "stage_worker/engines/registry.h"

namespace omnistage {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr absl::Duration kDeadline = absl::Seconds(10);

// Each event as a line: "step 2: (a,length)", "utility 8 = 2", "shutdown".
class Sink : public CoreSink {
 public:
  void OnStepOutputs(uint64_t step, std::vector<v1::RequestOutput> outputs) override {
    std::vector<std::string> rendered;
    for (const v1::RequestOutput& out : outputs) {
      rendered.push_back(absl::StrCat("(", out.request_id(),
                                      out.finished() ? ",finished" : "", ")"));
    }
    Record(absl::StrCat("step ", step, ": ", absl::StrJoin(rendered, " ")));
  }
  void OnUtilityResult(uint64_t call_id, absl::StatusOr<google::protobuf::Value> result) override {
    Record(result.ok() ? absl::StrCat("utility ", call_id, " = ", result->number_value())
                       : absl::StrCat("utility ", call_id, " error ", result.status().ToString()));
  }
  void OnShutdown() override { Record("shutdown"); }
  void OnFatal(const absl::Status& reason) override { Record("fatal " + reason.ToString()); }

  std::vector<std::string> events() const {
    absl::MutexLock lock(&mu_);
    return events_;
  }
  bool WaitFor(const std::string& event) const {
    absl::MutexLock lock(&mu_);
    auto seen = [&] {
      mu_.AssertHeld();
      return std::find(events_.begin(), events_.end(), event) != events_.end();
    };
    return mu_.AwaitWithTimeout(absl::Condition(&seen), kDeadline);
  }

 private:
  void Record(std::string event) {
    absl::MutexLock lock(&mu_);
    events_.push_back(std::move(event));
  }
  mutable absl::Mutex mu_;
  std::vector<std::string> events_ ABSL_GUARDED_BY(mu_);
};

class PythonWorkedExampleTest : public ::testing::Test {
 protected:
  // sim_llm's port unless `params` name another class.
  void Start(std::map<std::string, std::string> params = {}) {
    params["path"] = "stage_worker/engines/python:stage_worker/engines/python/testdata";
    params.insert({"module", "omnistage_engines.sim_llm"});
    params.insert({"class", "SimLlm"});
    params["test_utilities"] = "true";
    absl::StatusOr<std::unique_ptr<Engine>> engine = CreateEngine("python", params);
    ASSERT_TRUE(engine.ok()) << engine.status();
    engine_ = *std::move(engine);
    core_ = std::make_unique<EngineCore>(engine_.get(), &sink_);
  }
  void StartLoop() {
    loop_ = std::thread([this] {
      core_->Run();
      returned_.Notify();
    });
  }
  void TearDown() override {
    if (loop_.joinable()) {
      core_->RequestShutdown();
      loop_.join();
    }
  }

  static EngineRequest Request(std::string id, uint32_t steps) {
    EngineRequest request;
    request.id = std::move(id);
    request.input.emplace_back().mutable_text()->set_text("seed");
    request.params.set_max_tokens(steps);
    return request;
  }
  static google::protobuf::ListValue Args(double a, double b) {
    google::protobuf::ListValue args;
    args.add_values()->set_number_value(a);
    args.add_values()->set_number_value(b);
    return args;
  }
  // ADD a(2), ADD b(1), UTILITY 7 div(1,0), ABORT [b], UTILITY 8 div(6,3).
  void Prequeue() {
    ASSERT_TRUE(core_->Submit(CoreMessage::Add(Request("a", 2))));
    ASSERT_TRUE(core_->Submit(CoreMessage::Add(Request("b", 1))));
    ASSERT_TRUE(core_->Submit(CoreMessage::Utility(7, "div", Args(1, 0))));
    ASSERT_TRUE(core_->Submit(CoreMessage::Abort({"b"})));
    ASSERT_TRUE(core_->Submit(CoreMessage::Utility(8, "div", Args(6, 3))));
  }

  Sink sink_;
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<EngineCore> core_;
  std::thread loop_;
  absl::Notification returned_;
};

TEST_F(PythonWorkedExampleTest, Example1PrequeuedMessagesLateAddThenShutdown) {
  Start();
  Prequeue();
  StartLoop();
  ASSERT_TRUE(sink_.WaitFor("step 2: (a,finished)"));
  absl::SleepFor(absl::Milliseconds(200));  // The example's timing: the loop sits idle.
  ASSERT_TRUE(core_->Submit(CoreMessage::Add(Request("c", 1))));
  ASSERT_TRUE(sink_.WaitFor("step 3: (c,finished)"));
  absl::SleepFor(absl::Milliseconds(200));
  core_->RequestShutdown();
  ASSERT_TRUE(returned_.WaitForNotificationWithTimeout(kDeadline));
  EXPECT_THAT(sink_.events(),
              ElementsAre("utility 7 error INVALID_ARGUMENT: engine python: utility div: "
                          "division by zero",
                          "utility 8 = 2", "step 1: (a)", "step 2: (a,finished)",
                          "step 3: (c,finished)", "shutdown"));
  EXPECT_EQ(core_->steps(), 3u);
}

TEST_F(PythonWorkedExampleTest, Example2StepErrorIsFatal) {
  Start({{"module", "test_engines"}, {"class", "FaultySimLlm"}, {"raise_at_step", "2"}});
  Prequeue();
  StartLoop();
  ASSERT_TRUE(returned_.WaitForNotificationWithTimeout(kDeadline));
  EXPECT_FALSE(core_->Submit(CoreMessage::Add(Request("c", 1))));
  std::vector<std::string> events = sink_.events();
  ASSERT_EQ(events.size(), 4u);
  EXPECT_THAT(events[0], StartsWith("utility 7 error INVALID_ARGUMENT"));
  EXPECT_EQ(events[1], "utility 8 = 2");
  EXPECT_EQ(events[2], "step 1: (a)");
  EXPECT_THAT(events[3], StartsWith("fatal INTERNAL: python engine test_engines.FaultySimLlm: "
                                    "step raised RuntimeError: raised at step 2 (raise_at_step)"
                                    "\nTraceback"));
  EXPECT_THAT(events[3], HasSubstr("test_engines.py"));
  EXPECT_EQ(core_->steps(), 1u);
}

TEST_F(PythonWorkedExampleTest, Example3IdleThenShutdownFromAnotherThread) {
  Start();
  StartLoop();
  absl::SleepFor(absl::Milliseconds(500));  // The example: idle a while.
  EXPECT_EQ(core_->steps(), 0u);
  std::thread stopper([this] { core_->RequestShutdown(); });
  stopper.join();
  EXPECT_TRUE(returned_.WaitForNotificationWithTimeout(absl::Milliseconds(500)));
  EXPECT_THAT(sink_.events(), ElementsAre("shutdown"));
}

}  // namespace
}  // namespace omnistage
