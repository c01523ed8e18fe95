// The fault-injecting decorator around a small fake engine: which Step() call
// fails, the div utility and its errors, fail_utilities, stamps on outputs with
// payloads only, the keys it takes out of the engine's parameters, bad values
// refused with their field, and plain forwarding of everything else.
#include "stage_worker/engines/base/fault_injection.h"

#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/field_error.h"
#include "common/production_stamp.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace omnistage {
namespace {

using ::testing::ElementsAre;

// Each step, every live request gets one text payload "t"; a request whose id
// starts with "empty" gets an output without payloads instead. Counts its calls.
class FakeEngine : public Engine {
 public:
  absl::Status Validate(const EngineRequest& request) const override {
    return request.id == "bad" ? AtField(absl::InvalidArgumentError("fake: bad"), "input[0]")
                               : absl::OkStatus();
  }
  absl::Status ValidateInLoop(const EngineRequest& request) override {
    ++validate_in_loop_calls;
    return absl::OkStatus();
  }
  bool validates_in_loop() const override { return true; }
  absl::Status Add(EngineRequest request) override {
    live.push_back(request.id);
    produced_payloads += static_cast<int>(request.produced.size());
    return absl::OkStatus();
  }
  absl::Status AppendInput(const std::string& id, std::vector<v1::Payload> chunks,
                           bool last) override {
    appended += static_cast<int>(chunks.size());
    return absl::OkStatus();
  }
  void SetPlaybackDeadline(const std::string& id, absl::Time runs_out) override {
    deadlines.emplace_back(id, runs_out);
  }
  void Abort(const std::vector<std::string>& ids) override { aborted.push_back(ids); }
  bool HasWork() const override { return !live.empty(); }
  absl::StatusOr<std::vector<v1::RequestOutput>> Step() override {
    ++steps;
    std::vector<v1::RequestOutput> outputs;
    for (const std::string& id : live) {
      v1::RequestOutput& output = outputs.emplace_back();
      output.set_request_id(id);
      if (id.rfind("empty", 0) != 0) output.add_payloads()->mutable_text()->set_text("t");
    }
    return outputs;
  }
  absl::StatusOr<google::protobuf::Value> Utility(
      const std::string& name, const google::protobuf::ListValue& args) override {
    ++utility_calls;
    if (name == "ping") {
      google::protobuf::Value pong;
      pong.set_string_value("pong");
      return pong;
    }
    if (name == "broken") return absl::InternalError("fake: broken");
    return AtField(absl::InvalidArgumentError(
                       absl::StrCat("fake: unknown utility '", name, "' (known: ping)")),
                   "name");
  }
  int capacity() const override { return 7; }
  EngineLoad load() const override { return {static_cast<int>(live.size()), 2}; }
  ResumeMode resume_mode() const override { return resume; }
  PrefixCacheLayout prefix_cache() const override { return {4, 100}; }
  PrefixCacheStats prefix_cache_stats() const override { return {3, 40, 12}; }
  std::vector<CacheChange> TakeCacheChanges() override { return std::exchange(cache_changes, {}); }

  std::vector<std::string> live;
  std::vector<std::vector<std::string>> aborted;
  std::vector<std::pair<std::string, absl::Time>> deadlines;
  int steps = 0;
  int appended = 0;
  int utility_calls = 0;
  int validate_in_loop_calls = 0;
  int produced_payloads = 0;  // in every Add() so far
  ResumeMode resume = ResumeMode::kNone;
  std::vector<CacheChange> cache_changes = {{11, true}, {12, false}};
};

// The decorator around a FakeEngine, which the test keeps a pointer to.
struct Wrapped {
  explicit Wrapped(const FaultOptions& options) {
    auto owned = std::make_unique<FakeEngine>();
    fake = owned.get();
    engine = std::make_unique<FaultInjectingEngine>("fake", options, std::move(owned));
  }
  FakeEngine* fake;
  std::unique_ptr<Engine> engine;
};

EngineRequest Request(std::string id) {
  EngineRequest request;
  request.id = std::move(id);
  return request;
}

google::protobuf::ListValue Numbers(std::vector<double> numbers) {
  google::protobuf::ListValue args;
  for (double n : numbers) args.add_values()->set_number_value(n);
  return args;
}

TEST(TakeFaultOptionsTest, TakesItsKeysAndLeavesTheRest) {
  std::map<std::string, std::string> params = {{"batch_size", "4"},        {"fail_at_step", "3"},
                                               {"crash_at_step", "5"},     {"hang_at_step", "6"},
                                               {"fail_utilities", "true"}, {"stamp_outputs", "1"},
                                               {"test_utilities", "yes"},  {"module", "m"}};
  absl::StatusOr<FaultOptions> options = TakeFaultOptions("sim_llm", &params);
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->fail_at_step, 3);
  EXPECT_EQ(options->crash_at_step, 5);
  EXPECT_EQ(options->hang_at_step, 6);
  EXPECT_TRUE(options->fail_utilities);
  EXPECT_TRUE(options->stamp_outputs);
  EXPECT_TRUE(options->test_utilities);
  EXPECT_TRUE(options->any());
  EXPECT_EQ(params, (std::map<std::string, std::string>{{"batch_size", "4"}, {"module", "m"}}));
}

TEST(TakeFaultOptionsTest, NoKeysOrDefaultsTurnNothingOn) {
  std::map<std::string, std::string> params = {{"batch_size", "4"}};
  absl::StatusOr<FaultOptions> options = TakeFaultOptions("sim_llm", &params);
  ASSERT_TRUE(options.ok());
  EXPECT_FALSE(options->any());
  params = {{"fail_at_step", "0"}, {"stamp_outputs", "false"}};
  options = TakeFaultOptions("sim_llm", &params);
  ASSERT_TRUE(options.ok());
  EXPECT_FALSE(options->any());
  EXPECT_TRUE(params.empty());
}

TEST(TakeFaultOptionsTest, RefusesBadValuesNamingTheKey) {
  std::map<std::string, std::string> params = {{"fail_at_step", "soon"}};
  absl::Status status = TakeFaultOptions("talker", &params).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            "engine talker: parameter fail_at_step: expected an integer in [0, 1000000000], got "
            "'soon'");
  EXPECT_EQ(ErrorField(status), "fail_at_step");

  params = {{"hang_at_step", "-1"}};
  EXPECT_EQ(ErrorField(TakeFaultOptions("talker", &params).status()), "hang_at_step");
  params = {{"stamp_outputs", "maybe"}};
  status = TakeFaultOptions("python", &params).status();
  EXPECT_EQ(status.message(),
            "engine python: parameter stamp_outputs: expected a boolean (true or false), got "
            "'maybe'");
  EXPECT_EQ(ErrorField(status), "stamp_outputs");
}

TEST(WithFaultsTest, WrapsOnlyWhenAHookIsOn) {
  auto plain = std::make_unique<FakeEngine>();
  Engine* raw = plain.get();
  EXPECT_EQ(WithFaults("fake", FaultOptions(), std::move(plain)).get(), raw);
  FaultOptions options;
  options.test_utilities = true;
  std::unique_ptr<Engine> wrapped = WithFaults("fake", options, std::make_unique<FakeEngine>());
  EXPECT_NE(dynamic_cast<FaultInjectingEngine*>(wrapped.get()), nullptr);
}

// Step N counts every Step() call, whatever it returns; the failing step does
// not reach the engine.
TEST(FaultInjectingEngineTest, FailAtStepFailsTheNthStepCall) {
  FaultOptions options;
  options.fail_at_step = 3;
  Wrapped w(options);
  EXPECT_TRUE(w.engine->Step().ok());  // nothing live: an empty step counts too
  ASSERT_TRUE(w.engine->Add(Request("a")).ok());
  EXPECT_TRUE(w.engine->Step().ok());
  absl::Status third = w.engine->Step().status();
  EXPECT_EQ(third, absl::InternalError("engine fake: injected failure at step 3 (fail_at_step)"));
  EXPECT_EQ(w.fake->steps, 2);
  EXPECT_TRUE(w.engine->Step().ok());  // only the N-th
}

TEST(FaultInjectingEngineDeathTest, CrashAtStepAborts) {
  FaultOptions options;
  options.crash_at_step = 2;
  Wrapped w(options);
  EXPECT_TRUE(w.engine->Step().ok());
  EXPECT_DEATH(w.engine->Step().IgnoreError(),
               "engine fake: crashing at step 2 \\(crash_at_step\\)");
}

TEST(FaultInjectingEngineDeathTest, HangAtStepNeverReturns) {
  FaultOptions options;
  options.hang_at_step = 1;
  Wrapped w(options);
  // The child hangs; it is told apart from a return by the line it printed and
  // by dying of the alarm, not of an exit.
  EXPECT_EXIT(
      {
        alarm(1);
        w.engine->Step().IgnoreError();
        std::exit(0);
      },
      ::testing::KilledBySignal(SIGALRM), "engine fake: hanging at step 1 \\(hang_at_step\\)");
}

TEST(FaultInjectingEngineTest, StampsOnlyOutputsWithPayloads) {
  FaultOptions options;
  options.stamp_outputs = true;
  Wrapped w(options);
  ASSERT_TRUE(w.engine->Add(Request("a")).ok());
  ASSERT_TRUE(w.engine->Add(Request("empty")).ok());
  const int64_t before = MonotonicNowNs();
  absl::StatusOr<std::vector<v1::RequestOutput>> outputs = w.engine->Step();
  const int64_t after = MonotonicNowNs();
  ASSERT_TRUE(outputs.ok());
  ASSERT_EQ(outputs->size(), 2u);
  const v1::RequestOutput& a = (*outputs)[0];
  ASSERT_EQ(a.payloads_size(), 2);
  EXPECT_EQ(a.payloads(0).text().text(), "t");
  EXPECT_FALSE(StampOf(a.payloads(0)).has_value());
  std::optional<int64_t> stamp = StampOf(a.payloads(1));
  ASSERT_TRUE(stamp.has_value());
  EXPECT_GE(*stamp, before);
  EXPECT_LE(*stamp, after);
  EXPECT_EQ((*outputs)[1].payloads_size(), 0);
}

TEST(FaultInjectingEngineTest, DivResultsAndErrors) {
  FaultOptions options;
  options.test_utilities = true;
  Wrapped w(options);
  absl::StatusOr<google::protobuf::Value> result = w.engine->Utility("div", Numbers({6, 3}));
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->number_value(), 2.0);
  EXPECT_EQ(w.engine->Utility("div", Numbers({1, 0})).status(),
            absl::InvalidArgumentError("engine fake: utility div: division by zero"));
  const absl::Status two_numbers =
      absl::InvalidArgumentError("engine fake: utility div: expected two numbers [a, b]");
  EXPECT_EQ(w.engine->Utility("div", {}).status(), two_numbers);
  EXPECT_EQ(w.engine->Utility("div", Numbers({1, 2, 3})).status(), two_numbers);
  google::protobuf::ListValue text = Numbers({6});
  text.add_values()->set_string_value("3");
  EXPECT_EQ(w.engine->Utility("div", text).status(), two_numbers);
  EXPECT_EQ(w.fake->utility_calls, 0);  // div never reaches the engine

  // The engine's own utilities are its own; its "unknown utility" adds div.
  EXPECT_EQ(w.engine->Utility("ping", {})->string_value(), "pong");
  absl::Status unknown = w.engine->Utility("frob", {}).status();
  EXPECT_EQ(unknown.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(unknown.message(),
            "fake: unknown utility 'frob' (known: ping); also div (test_utilities)");
  EXPECT_EQ(ErrorField(unknown), "name");
  EXPECT_EQ(w.engine->Utility("broken", {}).status(), absl::InternalError("fake: broken"));
}

TEST(FaultInjectingEngineTest, WithoutTestUtilitiesDivIsTheEnginesBusiness) {
  FaultOptions options;
  options.fail_at_step = 100;
  Wrapped w(options);
  EXPECT_EQ(w.engine->Utility("div", Numbers({6, 3})).status().message(),
            "fake: unknown utility 'div' (known: ping)");
  EXPECT_EQ(w.fake->utility_calls, 1);
}

TEST(FaultInjectingEngineTest, FailUtilitiesFailsEveryCall) {
  FaultOptions options;
  options.fail_utilities = true;
  options.test_utilities = true;
  Wrapped w(options);
  for (const char* name : {"ping", "div", "frob"}) {
    EXPECT_EQ(w.engine->Utility(name, Numbers({6, 3})).status(),
              absl::InternalError(absl::StrCat("engine fake: utility '", name,
                                               "' failed (fail_utilities is set)")));
  }
  EXPECT_EQ(w.fake->utility_calls, 0);
}

TEST(FaultInjectingEngineTest, ForwardsEverythingElse) {
  FaultOptions options;
  options.fail_at_step = 100;
  Wrapped w(options);
  EXPECT_EQ(w.engine->capacity(), 7);
  EXPECT_TRUE(w.engine->validates_in_loop());
  EXPECT_EQ(ErrorField(w.engine->Validate(Request("bad"))), "input[0]");
  EXPECT_TRUE(w.engine->ValidateInLoop(Request("a")).ok());
  EXPECT_EQ(w.fake->validate_in_loop_calls, 1);
  EXPECT_FALSE(w.engine->HasWork());
  ASSERT_TRUE(w.engine->Add(Request("a")).ok());
  EXPECT_TRUE(w.engine->HasWork());
  EXPECT_EQ(w.engine->load().running, 1);
  EXPECT_EQ(w.engine->load().waiting, 2);
  ASSERT_TRUE(w.engine->AppendInput("a", std::vector<v1::Payload>(2), true).ok());
  EXPECT_EQ(w.fake->appended, 2);
  w.engine->SetPlaybackDeadline("a", absl::UnixEpoch());
  EXPECT_THAT(w.fake->deadlines, ElementsAre(std::make_pair(std::string("a"), absl::UnixEpoch())));
  w.engine->Abort({"a", "b"});
  EXPECT_THAT(w.fake->aborted, ElementsAre(ElementsAre("a", "b")));
  absl::StatusOr<std::vector<v1::RequestOutput>> outputs = w.engine->Step();
  ASSERT_TRUE(outputs.ok());
  ASSERT_EQ(outputs->size(), 1u);
  EXPECT_EQ((*outputs)[0].payloads_size(), 1);  // no stamp unless asked
}

// The worker reports the wrapped engine's prefix cache (docs/engines.md,
// "Prefix cache"): a hook must not hide it.
TEST(FaultInjectingEngineTest, ForwardsThePrefixCache) {
  FaultOptions options;
  options.fail_at_step = 100;
  Wrapped w(options);
  EXPECT_EQ(w.engine->prefix_cache().block_tokens, 4);
  EXPECT_EQ(w.engine->prefix_cache().capacity_blocks, 100);
  const PrefixCacheStats stats = w.engine->prefix_cache_stats();
  EXPECT_EQ(stats.blocks, 3);
  EXPECT_EQ(stats.hit_tokens, 40);
  EXPECT_EQ(stats.miss_tokens, 12);
  const std::vector<CacheChange> changes = w.engine->TakeCacheChanges();
  ASSERT_EQ(changes.size(), 2u);
  EXPECT_EQ(changes[0].block, 11u);
  EXPECT_TRUE(changes[0].stored);
  EXPECT_EQ(changes[1].block, 12u);
  EXPECT_FALSE(changes[1].stored);
  EXPECT_TRUE(w.engine->TakeCacheChanges().empty());
}

// Failover asks the wrapped engine how it resumes: a hook must not hide a
// continuation engine, nor make one of a replay engine.
TEST(FaultInjectingEngineTest, ResumesAsTheEngineItWrapsAndPassesProducedOn) {
  FaultOptions options;
  options.stamp_outputs = true;
  for (ResumeMode mode : {ResumeMode::kNone, ResumeMode::kReplay, ResumeMode::kContinuation}) {
    Wrapped w(options);
    w.fake->resume = mode;
    EXPECT_EQ(w.engine->resume_mode(), mode);
  }
  Wrapped w(options);
  EngineRequest request = Request("a");
  request.produced.push_back(v1::Payload());
  request.produced.back().mutable_tokens()->add_ids(7);
  ASSERT_TRUE(w.engine->Add(std::move(request)).ok());
  EXPECT_EQ(w.fake->produced_payloads, 1);
}

}  // namespace
}  // namespace omnistage
