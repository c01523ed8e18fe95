// Tests for what latency objectives decide (objective_planner.h) through
// PipelineCore on the manual clock: the predictor learns each replica's lead
// and the admission queue's wait from what it observes and says its
// prediction in the record; a sheddable request predicted to miss is refused
// with a retry hint, standard and critical ones are served; picks avoid a
// replica predicted to miss; each miss says why. Fakes only.
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "common/retry_hint.h"
#include "orchestrator/core/pipeline_core.h"
#include "orchestrator/core/testing/pipeline_core_harness.h"

namespace omnistage {
namespace pipeline_core_test {
namespace {

using ::testing::DoubleNear;
using ::testing::HasSubstr;
using ::testing::SizeIs;

constexpr absl::Duration kLead = absl::Milliseconds(100);

class PipelineCoreObjectivesTest : public PipelineCoreTest {
 protected:
  void BuildOne(int replicas = 1) {
    PipelineConfig config;
    config.name = "one-stage";
    config.stages.push_back(
        Stage(0, "thinker", v1::MODALITY_TEXT, true, InputMode::kOnFinish, replicas));
    config.stages[0].pick = PickPolicy::kRoundRobin;
    config.max_prompt_bytes = 32;
    config.max_in_flight = 1000;
    config.max_queued = 100;
    config.max_queue_wait = absl::Seconds(30);
    config.request_idle_timeout = absl::ZeroDuration();
    Build(config);
  }

  std::shared_ptr<FakeResponseSink> GenWith(
      const std::string& id, uint32_t first_output_ms,
      v1::Criticality criticality = v1::CRITICALITY_UNSPECIFIED) {
    v1::GenerateRequest request;
    request.set_request_id(id);
    request.set_prompt("Hi there");
    request.mutable_objectives()->set_first_output_ms(first_output_ms);
    request.mutable_objectives()->set_criticality(criticality);
    return Gen(std::move(request));
  }

  // The replica of stage 0 that request `id` was sent to; -1: none.
  int SentTo(const std::string& id) const {
    for (int replica = 0; replica < 4; ++replica) {
      const std::string sent = absl::StrCat("T", replica, ".add ", id);
      for (const std::string& line : LogWith(sent)) {
        if (absl::EndsWith(line, sent)) return replica;
      }
    }
    return -1;
  }

  // Runs `id` on stage 0: its whole answer comes `lead` after it was sent.
  void Run(const std::string& id, absl::Duration lead, int replica = 0) {
    Gen(id);
    scheduler_.AdvanceBy(lead);
    Done(0, replica, id, {Text("ok")});
  }

  std::map<std::string, v1::FinishedRequest> Records() {
    std::map<std::string, v1::FinishedRequest> records;
    const v1::PipelineStatus status = core().Status();
    for (const v1::FinishedRequest& r : status.recent()) records[r.request_id()] = r;
    return records;
  }

  std::string Metrics() {
    core().SnapshotMetrics();
    return core().metrics_registry().Render();
  }
};

// Three requests teach the replica its lead; the next one's record carries
// the prediction, and the error is exported.
TEST_F(PipelineCoreObjectivesTest, ThePredictorLearnsTheLeadAndTheRecordSaysIt) {
  BuildOne();
  GenWith("first", 1000);
  scheduler_.AdvanceBy(kLead);
  Done(0, 0, "first", {Text("ok")});
  for (const char* id : {"a", "b"}) Run(id, kLead);
  GenWith("predicted", 1000);
  scheduler_.AdvanceBy(absl::Milliseconds(120));
  Done(0, 0, "predicted", {Text("ok")});
  std::map<std::string, v1::FinishedRequest> records = Records();
  // Nothing learned before the first: no prediction.
  EXPECT_EQ(records["first"].predicted_first_output_seconds(), 0);
  EXPECT_THAT(records["predicted"].predicted_first_output_seconds(), DoubleNear(0.1, 0.005));
  EXPECT_EQ(records["predicted"].first_output_objective(), v1::OBJECTIVE_OUTCOME_MET);
  EXPECT_EQ(records["predicted"].criticality(), v1::CRITICALITY_STANDARD);
  const std::string text = Metrics();
  // |0.1 - 0.12| / 0.12: within 25%.
  EXPECT_THAT(text, HasSubstr("omnistage_latency_prediction_error_ratio_bucket{prediction=\""
                              "first_output\",stage=\"\",le=\"0.25\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("omnistage_latency_prediction_error_ratio_count{prediction=\""
                              "stage_first_output\",stage=\"thinker\"}"));
}

// Predicted to miss: a sheddable request is refused at once with a retry
// hint; a standard and a critical one are served, and their misses say they
// were predicted.
TEST_F(PipelineCoreObjectivesTest, ASheddableRequestPredictedToMissIsRefusedOthersAreServed) {
  BuildOne();
  for (const char* id : {"a", "b", "c"}) Run(id, kLead);
  auto shed = GenWith("shed", 50, v1::CRITICALITY_SHEDDABLE);
  ASSERT_EQ(shed->fail_count(), 1);
  EXPECT_EQ(shed->fail_status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(shed->fail_status().message(),
              HasSubstr("predicted to miss this request's first output objective (100 ms "
                        "predicted, 50 ms asked)"));
  EXPECT_EQ(RetryAfterOf(shed->fail_status()), absl::Seconds(1));
  EXPECT_EQ(SentTo("shed"), -1);
  // One that is predicted to make it is not refused.
  auto fits = GenWith("fits", 500, v1::CRITICALITY_SHEDDABLE);
  EXPECT_EQ(fits->fail_count(), 0);
  for (const auto& [id, criticality] :
       {std::pair<const char*, v1::Criticality>{"critical", v1::CRITICALITY_CRITICAL},
        {"standard", v1::CRITICALITY_STANDARD}}) {
    auto served = GenWith(id, 50, criticality);
    EXPECT_EQ(served->fail_count(), 0) << id;
    EXPECT_EQ(SentTo(id), 0) << id;
  }
  scheduler_.AdvanceBy(kLead);
  for (const char* id : {"fits", "critical", "standard"}) Done(0, 0, id, {Text("ok")});
  std::map<std::string, v1::FinishedRequest> records = Records();
  EXPECT_EQ(records["fits"].first_output_objective(), v1::OBJECTIVE_OUTCOME_MET);
  for (const char* id : {"critical", "standard"}) {
    EXPECT_EQ(records[id].first_output_objective(), v1::OBJECTIVE_OUTCOME_MISSED) << id;
    EXPECT_EQ(records[id].objective_miss(), "predicted") << id;
  }
  const std::string text = Metrics();
  EXPECT_THAT(text, HasSubstr("omnistage_admission_refusals_total{reason=\"predicted_miss\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("omnistage_objective_misses_total{objective=\"first_output\","
                              "reason=\"predicted\"} 2\n"));
  // The status's tally, for the console.
  const v1::PipelineStatus status = core().Status();
  EXPECT_EQ(status.objectives().shed(), 1);
  EXPECT_EQ(status.objectives().met(), 1);  // "fits" (a, b and c had none).
  EXPECT_EQ(status.objectives().missed(), 2);
  EXPECT_EQ(status.objectives().misses().at("predicted"), 2);
}

// The admission queue's wait is learned from the requests that waited; one
// that then waits far longer than predicted missed because it queued.
TEST_F(PipelineCoreObjectivesTest, AWaitLongerThanPredictedIsTheQueuesDoing) {
  BuildOne();
  // Others' requests fill all but one slot of the replica (capacity 8 and a
  // headroom of 2).
  v1::StepOutputs report;
  report.mutable_load()->set_requests(9);
  core().OnStepOutputs(0, 0, report);
  // a0 runs, a1..a3 wait behind 0, 1 and 2 others: 100 ms per request.
  for (const char* id : {"a0", "a1", "a2", "a3"}) Gen(id);
  for (const char* id : {"a0", "a1", "a2", "a3"}) {
    scheduler_.AdvanceBy(kLead);
    Done(0, 0, id, {Text("ok")});
  }
  Gen("blocker");
  // Predicted: 100 ms in the queue, 100 ms on the replica; 400 ms asked.
  auto late = GenWith("late", 400);
  EXPECT_EQ(SentTo("late"), -1);
  scheduler_.AdvanceBy(absl::Milliseconds(600));
  Done(0, 0, "blocker", {Text("ok")});
  EXPECT_EQ(SentTo("late"), 0);
  scheduler_.AdvanceBy(kLead);
  Done(0, 0, "late", {Text("ok")});
  std::map<std::string, v1::FinishedRequest> records = Records();
  EXPECT_THAT(records["late"].predicted_first_output_seconds(), DoubleNear(0.2, 0.01));
  EXPECT_EQ(records["late"].first_output_objective(), v1::OBJECTIVE_OUTCOME_MISSED);
  EXPECT_EQ(records["late"].objective_miss(), "queued");
  EXPECT_THAT(Metrics(), HasSubstr("omnistage_objective_misses_total{objective=\"first_output\","
                                   "reason=\"queued\"} 1\n"));
}

// A sheddable request that waited in the queue until it would miss ends as
// it leaves, without running; a standard one behind it runs.
TEST_F(PipelineCoreObjectivesTest, ASheddableRequestThatWaitedTooLongEndsAsItLeaves) {
  BuildOne();
  v1::StepOutputs report;
  report.mutable_load()->set_requests(9);
  core().OnStepOutputs(0, 0, report);
  for (const char* id : {"a", "b", "c"}) Run(id, kLead);
  Gen("blocker");
  // Nothing known of the queue's wait: both are admitted.
  auto shed = GenWith("shed", 300, v1::CRITICALITY_SHEDDABLE);
  auto kept = GenWith("kept", 300, v1::CRITICALITY_STANDARD);
  EXPECT_EQ(shed->fail_count(), 0);
  scheduler_.AdvanceBy(absl::Milliseconds(250));
  Done(0, 0, "blocker", {Text("ok")});
  EXPECT_EQ(SentTo("shed"), -1);
  EXPECT_EQ(SentTo("kept"), 0);
  EXPECT_EQ(shed->terminal().finish_reason(), v1::FINISH_REASON_ERROR);
  EXPECT_EQ(shed->terminal().error().code(),
            static_cast<int>(absl::StatusCode::kResourceExhausted));
  EXPECT_THAT(shed->terminal().error().message(),
              HasSubstr("waited 250 ms in the admission queue and is now predicted to miss its "
                        "first output objective (300 ms)"));
  Done(0, 0, "kept", {Text("late")});
  EXPECT_THAT(Metrics(),
              HasSubstr("omnistage_admission_refusals_total{reason=\"predicted_miss\"} 1\n"));
}

// Replica 1 is three times slower: a request whose deadline it would miss
// goes to replica 0 whatever the rotation says; one without an objective
// still goes round. A replica far slower than its prediction is blamed.
TEST_F(PipelineCoreObjectivesTest, PicksAvoidAReplicaPredictedToMissAndASlowOneIsBlamed) {
  BuildOne(/*replicas=*/2);
  for (int i = 0; i < 3; ++i) {
    const std::string fast = absl::StrCat("fast", i);
    const std::string slow = absl::StrCat("slow", i);
    Gen(fast);
    Gen(slow);
    ASSERT_EQ(SentTo(fast), 0);
    ASSERT_EQ(SentTo(slow), 1);
    scheduler_.AdvanceBy(kLead);
    Done(0, 0, fast, {Text("ok")});
    scheduler_.AdvanceBy(2 * kLead);
    Done(0, 1, slow, {Text("ok")});
  }
  for (int i = 0; i < 2; ++i) {
    const std::string id = absl::StrCat("hurry", i);
    GenWith(id, 200);
    EXPECT_EQ(SentTo(id), 0) << id;
    scheduler_.AdvanceBy(kLead);
    Done(0, 0, id, {Text("ok")});
  }
  ClearLog();
  Gen("plain0");
  Gen("plain1");
  EXPECT_EQ(SentTo("plain0") + SentTo("plain1"), 1);  // One on each.
  // Predicted 100 ms on replica 0; it takes 600.
  GenWith("stuck", 400);
  ASSERT_EQ(SentTo("stuck"), 0);
  scheduler_.AdvanceBy(6 * kLead);
  Done(0, 0, "stuck", {Text("ok")});
  std::map<std::string, v1::FinishedRequest> records = Records();
  EXPECT_EQ(records["hurry0"].first_output_objective(), v1::OBJECTIVE_OUTCOME_MET);
  EXPECT_EQ(records["hurry1"].first_output_objective(), v1::OBJECTIVE_OUTCOME_MET);
  EXPECT_EQ(records["stuck"].objective_miss(), "slow_replica");
  Done(0, SentTo("plain0"), "plain0");
  Done(0, SentTo("plain1"), "plain1");
}

// A request sent to a busy engine joins its next step: its first output
// comes a step after the current one ends. The replica's step events teach
// the predictor the step's period, and where in its step the engine is
// tells two requests apart that arrive 10 ms apart in a step.
TEST_F(PipelineCoreObjectivesTest, ThePredictionKnowsWhereInItsStepTheEngineIs) {
  BuildOne();
  uint64_t step = 0;
  // The end of an engine step (steps of 20 ms), `ms` from now: "bg" (running
  // throughout) gets a token, `done` ends; the load is what stays.
  auto next_step = [&](const std::vector<std::string>& done, int load, int ms = 20) {
    scheduler_.AdvanceBy(absl::Milliseconds(ms));
    v1::StepOutputs outputs;
    outputs.set_step(++step);
    outputs.mutable_load()->set_requests(load);
    v1::RequestOutput* token = outputs.add_outputs();
    token->set_request_id("bg");
    *token->add_payloads() = Text("t");
    for (const std::string& id : done) {
      v1::RequestOutput* output = outputs.add_outputs();
      output->set_request_id(id);
      *output->add_payloads() = Text("ok");
      output->set_finished(true);
      output->set_finish_reason(v1::FINISH_REASON_STOP);
    }
    core().OnStepOutputs(0, 0, outputs);
  };
  // `id` arrives `offset` into a step: it joins the next one, and its whole
  // answer comes as that one ends.
  auto run = [&](const std::string& id, int offset_ms) {
    scheduler_.AdvanceBy(absl::Milliseconds(offset_ms));
    GenWith(id, 1000);
    ASSERT_EQ(SentTo(id), 0);
    next_step({}, 2, 20 - offset_ms);
    next_step({id}, 1);
  };
  Gen("bg");
  for (int i = 0; i < 3; ++i) next_step({}, 1);
  int learner = 0;
  for (int offset : {3, 17, 9, 13, 6, 19, 11, 2, 15, 8}) {
    run(absl::StrCat("learn", learner++), offset);
  }
  run("early", 5);
  run("late", 15);
  std::map<std::string, v1::FinishedRequest> records = Records();
  // 15 ms of the current step, then a whole one; 5 ms, then a whole one.
  EXPECT_THAT(records["early"].predicted_first_output_seconds(), DoubleNear(0.035, 0.002));
  EXPECT_THAT(records["late"].predicted_first_output_seconds(), DoubleNear(0.025, 0.002));
  EXPECT_THAT(records["early"].first_output_seconds(), DoubleNear(0.035, 0.001));
  Done(0, 0, "bg");
}

TEST_F(PipelineCoreObjectivesTest, AnUnknownCriticalityIsRefusedAtItsField) {
  BuildOne();
  auto sink = GenWith("odd", 100, static_cast<v1::Criticality>(7));
  ASSERT_EQ(sink->fail_count(), 1);
  EXPECT_EQ(sink->fail_status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(sink->fail_status().message(),
              HasSubstr("objectives.criticality: 7 is none of CRITICAL (1), STANDARD (2) and "
                        "SHEDDABLE (3)"));
  v1::GenerateRequest request;
  request.set_request_id("gaps");
  request.set_prompt("Hi there");
  request.mutable_objectives()->set_between_outputs_ms(600001);
  EXPECT_EQ(Gen(std::move(request))->fail_status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace pipeline_core_test
}  // namespace omnistage
