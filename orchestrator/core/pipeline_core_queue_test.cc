// Tests for PipelineCore's admission queue on the manual clock: below
// saturation every request goes straight to stage 0 as before; past it they
// wait in the orchestrator and leave by priority, then fair share, then
// arrival; the queue is bounded in size and in time, sheds for a higher
// priority, ends a queued request at once on abort or cancel, and refuses
// what waits when draining. Fakes only.
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

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// One replica of capacity 8 (the harness's Ready) with a headroom of 2: ten
// requests run at once.
constexpr int kSlots = 10;
// v1::Error codes.
constexpr int kResourceExhausted = static_cast<int>(absl::StatusCode::kResourceExhausted);
constexpr int kUnavailable = static_cast<int>(absl::StatusCode::kUnavailable);

class PipelineCoreQueueTest : public PipelineCoreTest {
 protected:
  void BuildOne(int max_queued = 100) {
    PipelineConfig config;
    config.name = "one-stage";
    config.stages.push_back(
        Stage(0, "thinker", v1::MODALITY_TEXT, true, InputMode::kOnFinish, /*replicas=*/1));
    config.max_prompt_bytes = 32;
    config.max_in_flight = 1000;
    config.max_queued = max_queued;
    config.max_queue_wait = absl::Seconds(30);
    config.admission_headroom = 2;
    // Requests that run stay running until a test ends them.
    config.request_idle_timeout = absl::ZeroDuration();
    Build(config);
  }

  std::shared_ptr<FakeResponseSink> GenAs(const std::string& id, const std::string& identity,
                                          std::optional<int> priority = std::nullopt,
                                          int weight = 1, int default_priority = 0,
                                          int max_priority = kMaxPriority,
                                          uint32_t first_output_ms = 0) {
    v1::GenerateRequest request;
    request.set_request_id(id);
    request.set_prompt("Hi there");
    if (priority.has_value()) request.set_priority(*priority);
    if (first_output_ms > 0) request.mutable_objectives()->set_first_output_ms(first_output_ms);
    Caller caller;
    caller.identity = identity;
    caller.priority = default_priority;
    caller.max_priority = max_priority;
    caller.weight = weight;
    auto sink = std::make_shared<FakeResponseSink>();
    sinks_.push_back(sink);
    core().Generate(std::move(request), sink, "", caller);
    return sink;
  }

  // Fills every slot with "run0".."run9" (sent at once).
  void FillSlots() {
    for (int i = 0; i < kSlots; ++i) GenAs(absl::StrCat("run", i), "filler");
    ASSERT_EQ(LogWith(".add ").size(), static_cast<size_t>(kSlots));
  }

  // The ids sent to stage 0 since the last ClearLog, in order.
  std::vector<std::string> Sent() const {
    std::vector<std::string> ids;
    for (const std::string& line : LogWith("T0.add ")) {
      const std::string rest = line.substr(line.find(".add ") + 5);
      ids.push_back(rest.substr(0, rest.find(' ')));
    }
    return ids;
  }
};

TEST_F(PipelineCoreQueueTest, BelowSaturationEveryRequestGoesStraightToStageZero) {
  BuildOne();
  auto sink = GenAs("a", "alice");
  EXPECT_THAT(Sent(), ElementsAre("a"));
  Done(0, 0, "a", {Text("ok")});
  EXPECT_EQ(sink->terminal().finish_reason(), v1::FINISH_REASON_STOP);
}

TEST_F(PipelineCoreQueueTest, PastTheSlotsRequestsWaitStartedAndLeaveAsSlotsFree) {
  BuildOne();
  FillSlots();
  ClearLog();
  auto waiting = GenAs("w", "alice");
  // Its call started (the client has its id), but no worker has it.
  EXPECT_EQ(waiting->fail_count(), 0);
  EXPECT_THAT(Sent(), IsEmpty());
  EXPECT_EQ(core().in_flight(), static_cast<size_t>(kSlots + 1));
  Done(0, 0, "run0", {Text("ok")});
  EXPECT_THAT(Sent(), ElementsAre("w"));
  Done(0, 0, "w", {Text("done")});
  EXPECT_EQ(waiting->Text("w"), "done");
  for (int i = 1; i < kSlots; ++i) Done(0, 0, absl::StrCat("run", i));
}

TEST_F(PipelineCoreQueueTest, OthersLoadOnASharedWorkerCountsAgainstItsSlots) {
  BuildOne();
  // Another orchestrator's 7 requests on the worker: of its 10 slots
  // (capacity 8, headroom 2), 3 are left for this one.
  v1::StepOutputs report;
  report.mutable_load()->set_requests(7);
  core().OnStepOutputs(0, 0, report);
  for (const char* id : {"a", "b", "c", "d"}) GenAs(id, "alice");
  EXPECT_THAT(Sent(), ElementsAre("a", "b", "c"));
  // The others' requests end: the worker holds only this one's 3 now.
  ClearLog();
  report.mutable_load()->set_requests(3);
  core().OnStepOutputs(0, 0, report);
  EXPECT_THAT(Sent(), ElementsAre("d"));
  for (const char* id : {"a", "b", "c", "d"}) Done(0, 0, id);
}

TEST_F(PipelineCoreQueueTest, HigherPriorityLeavesFirst) {
  BuildOne();
  FillSlots();
  ClearLog();
  GenAs("low", "alice", 1);
  GenAs("high", "bob", 7);
  GenAs("mid", "carol", 4);
  Done(0, 0, "run0");
  Done(0, 0, "run1");
  Done(0, 0, "run2");
  EXPECT_THAT(Sent(), ElementsAre("high", "mid", "low"));
  for (int i = 3; i < kSlots; ++i) Done(0, 0, absl::StrCat("run", i));
  for (const char* id : {"low", "high", "mid"}) Done(0, 0, id);
}

// One identity's queued requests leave by their objectives' deadlines, the
// earliest first, those without one last; as each ends, its first output is
// judged against its objective: in the access records, the metrics and the
// goodput (the access line: finished_requests_test).
TEST_F(PipelineCoreQueueTest, TheEarliestDeadlineLeavesFirstAndEachObjectiveIsJudged) {
  BuildOne();
  FillSlots();
  ClearLog();
  GenAs("none", "alice");
  GenAs("relaxed", "alice", std::nullopt, 1, 0, kMaxPriority, /*first_output_ms=*/5000);
  scheduler_.AdvanceBy(absl::Milliseconds(100));
  GenAs("urgent", "alice", std::nullopt, 1, 0, kMaxPriority, /*first_output_ms=*/300);
  for (int i = 0; i < 3; ++i) Done(0, 0, absl::StrCat("run", i));
  EXPECT_THAT(Sent(), ElementsAre("urgent", "relaxed", "none"));
  Done(0, 0, "urgent", {Text("in time")});  // 100 ms after it came: met
  scheduler_.AdvanceBy(absl::Seconds(6));
  Done(0, 0, "relaxed", {Text("late")});  // 6.1 s: missed
  Done(0, 0, "none", {Text("no objective")});
  for (int i = 3; i < kSlots; ++i) Done(0, 0, absl::StrCat("run", i));

  std::map<std::string, v1::ObjectiveOutcome> judged;
  const v1::PipelineStatus status = core().Status();
  for (const v1::FinishedRequest& r : status.recent()) {
    judged[r.request_id()] = r.first_output_objective();
  }
  EXPECT_EQ(judged["urgent"], v1::OBJECTIVE_OUTCOME_MET);
  EXPECT_EQ(judged["relaxed"], v1::OBJECTIVE_OUTCOME_MISSED);
  EXPECT_EQ(judged["none"], v1::OBJECTIVE_OUTCOME_NONE);
  core().SnapshotMetrics();
  const std::string text = core().metrics_registry().Render();
  EXPECT_THAT(text, HasSubstr("omnistage_latency_objectives_total{objective=\"first_output\","
                              "outcome=\"met\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("omnistage_latency_objectives_total{objective=\"first_output\","
                              "outcome=\"missed\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("omnistage_goodput_requests_total 1\n"));
}

// A request without objectives takes its identity's, else the pipeline's.
TEST_F(PipelineCoreQueueTest, UnsetObjectivesTakeTheIdentitysThenThePipelines) {
  PipelineConfig config;
  config.name = "one-stage";
  config.stages.push_back(
      Stage(0, "thinker", v1::MODALITY_TEXT, true, InputMode::kOnFinish, /*replicas=*/1));
  config.max_prompt_bytes = 32;
  config.objectives.first_output_ms = 100;
  Build(config);
  Caller strict = Caller::Of("strict");
  strict.objectives.first_output_ms = 50;
  for (const auto& [id, caller] :
       {std::pair<const char*, Caller>{"by-pipeline", Caller::Of("plain")},
        {"by-identity", strict}}) {
    v1::GenerateRequest request;
    request.set_request_id(id);
    request.set_prompt("Hi there");
    auto sink = std::make_shared<FakeResponseSink>();
    sinks_.push_back(sink);
    core().Generate(std::move(request), sink, "", caller);
  }
  scheduler_.AdvanceBy(absl::Milliseconds(75));  // Within 100, past 50.
  Done(0, 0, "by-pipeline", {Text("a")});
  Done(0, 0, "by-identity", {Text("b")});
  const v1::PipelineStatus status = core().Status();
  std::map<std::string, v1::ObjectiveOutcome> judged;
  for (const v1::FinishedRequest& r : status.recent()) {
    judged[r.request_id()] = r.first_output_objective();
  }
  EXPECT_EQ(judged["by-pipeline"], v1::OBJECTIVE_OUTCOME_MET);
  EXPECT_EQ(judged["by-identity"], v1::OBJECTIVE_OUTCOME_MISSED);
}

// An objective past ten minutes, or one for audio a request does not get, is
// refused at its field.
TEST_F(PipelineCoreQueueTest, AbsurdObjectivesAreRefused) {
  BuildOne();
  auto sink = GenAs("long", "alice", std::nullopt, 1, 0, kMaxPriority, /*first_output_ms=*/600001);
  EXPECT_EQ(sink->fail_count(), 1);
  EXPECT_EQ(sink->fail_status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(sink->fail_status().message(),
              HasSubstr("objectives.first_output_ms: 600001 ms is more than the 600000 ms"));
  v1::GenerateRequest request;
  request.set_request_id("mute");
  request.set_prompt("Hi there");
  request.mutable_objectives()->set_first_audio_ms(500);
  auto mute = std::make_shared<FakeResponseSink>();
  sinks_.push_back(mute);
  core().Generate(std::move(request), mute, "", Caller());
  EXPECT_EQ(mute->fail_count(), 1);
  EXPECT_THAT(mute->fail_status().message(),
              HasSubstr("objectives.first_audio_ms: the request gets no audio"));
}

TEST_F(PipelineCoreQueueTest, AQuietIdentityIsNotStuckBehindAFlood) {
  BuildOne();
  FillSlots();
  ClearLog();
  for (int i = 0; i < 30; ++i) GenAs(absl::StrCat("flood", i), "flood");
  GenAs("quiet", "quiet");
  // The next two free slots: the flood's turn, then the quiet one's.
  Done(0, 0, "run0");
  Done(0, 0, "run1");
  EXPECT_THAT(Sent(), ElementsAre("flood0", "quiet"));
  Done(0, 0, "quiet");
  // Then the flood has the slots to itself, in arrival order: the quiet
  // one's and the 8 left by the fillers.
  for (int i = 2; i < kSlots; ++i) Done(0, 0, absl::StrCat("run", i));
  std::vector<std::string> sent = Sent();
  EXPECT_EQ(sent.size(), 11u);
  EXPECT_EQ(sent.back(), "flood9");
  for (int i = 0; i < 30; ++i) {
    const std::string id = absl::StrCat("flood", i);
    if (core().in_flight() > 0) Done(0, 0, id);
  }
}

TEST_F(PipelineCoreQueueTest, WeightsShareTheFreedSlots) {
  BuildOne();
  FillSlots();
  ClearLog();
  for (int i = 0; i < 12; ++i) {
    GenAs(absl::StrCat("a", i), "alice", std::nullopt, /*weight=*/3);
    GenAs(absl::StrCat("b", i), "bob", std::nullopt, /*weight=*/1);
  }
  for (int i = 0; i < 8; ++i) Done(0, 0, absl::StrCat("run", i));
  int alice = 0;
  for (const std::string& id : Sent()) alice += id[0] == 'a';
  EXPECT_EQ(alice, 6);  // 3 of every 4.
  LeaveOpen("the rest of the queue is not the point");
}

TEST_F(PipelineCoreQueueTest, PriorityAboveTheCeilingIsRefusedAndBelowIsTheCallersDefault) {
  BuildOne();
  auto above = GenAs("too-high", "alice", 6, 1, /*default_priority=*/2, /*max_priority=*/5);
  EXPECT_EQ(above->fail_status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(std::string(above->fail_status().message()),
              HasSubstr("priority 6 is above the highest 'alice' may ask for (5)"));
  auto out_of_range = GenAs("eleven", "alice", 11);
  EXPECT_EQ(out_of_range->fail_status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(out_of_range->fail_status().message()), HasSubstr("priority"));
  // Lowering is allowed; unset takes the identity's default (2 > 1 here).
  FillSlots();
  ClearLog();
  GenAs("lowered", "alice", 1, 1, 2, 5);
  GenAs("default", "alice", std::nullopt, 1, 2, 5);
  Done(0, 0, "run0");
  EXPECT_THAT(Sent(), ElementsAre("default"));
  Done(0, 0, "run1");
  for (int i = 2; i < kSlots; ++i) Done(0, 0, absl::StrCat("run", i));
  Done(0, 0, "default");
  Done(0, 0, "lowered");
}

TEST_F(PipelineCoreQueueTest, AFullQueueRefusesOrShedsForAHigherPriority) {
  BuildOne(/*max_queued=*/2);
  FillSlots();
  ClearLog();
  auto first = GenAs("q1", "alice", 3);
  auto second = GenAs("q2", "bob", 3);
  auto refused = GenAs("q3", "carol", 3);
  EXPECT_EQ(refused->fail_status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(refused->fail_status().message()),
              HasSubstr("admission queue is full: 2 requests wait (limits.max_queued)"));
  EXPECT_THAT(std::string(refused->fail_status().message()), HasSubstr("retry after"));
  EXPECT_EQ(RetryAfterOf(refused->fail_status()), absl::Seconds(1));
  auto urgent = GenAs("urgent", "dave", 8);
  EXPECT_EQ(urgent->fail_count(), 0);
  // The newest of the lower priority made room; it ends with a terminal.
  EXPECT_EQ(second->terminal().finish_reason(), v1::FINISH_REASON_ERROR);
  EXPECT_EQ(second->terminal().error().code(), kResourceExhausted);
  EXPECT_THAT(second->terminal().error().message(), HasSubstr("shed"));
  EXPECT_EQ(second->terminal().error().retry_after_ms(), 1000);
  Done(0, 0, "run0");
  Done(0, 0, "run1");
  EXPECT_THAT(Sent(), ElementsAre("urgent", "q1"));
  for (int i = 2; i < kSlots; ++i) Done(0, 0, absl::StrCat("run", i));
  Done(0, 0, "urgent");
  Done(0, 0, "q1");
}

// Work that can wait (GenerateRequest.batch) leaves after every priority,
// whatever priority it names (and beyond its caller's ceiling: it is not
// used), and is the first shed from a full queue, even for priority 0.
TEST_F(PipelineCoreQueueTest, BatchWorkWaitsBelowEveryPriorityAndIsShedFirst) {
  BuildOne(/*max_queued=*/3);
  FillSlots();
  ClearLog();
  const auto batch = [this](const std::string& id) {
    v1::GenerateRequest request;
    request.set_request_id(id);
    request.set_prompt("Hi there");
    request.set_batch(true);
    request.set_priority(9);
    Caller caller = Caller::Of("alice");
    caller.max_priority = 0;
    auto sink = std::make_shared<FakeResponseSink>();
    sinks_.push_back(sink);
    core().Generate(std::move(request), sink, "", caller);
    return sink;
  };
  auto first = batch("b1");
  auto second = batch("b2");
  EXPECT_EQ(first->fail_count(), 0);
  auto interactive = GenAs("i1", "bob", 0);
  EXPECT_EQ(core().Status().queued_size(), 2);
  EXPECT_EQ(core().Status().queued(0).priority(), 0);
  EXPECT_EQ(core().Status().queued(1).priority(), kBatchPriority);
  // Full (3): a priority-0 arrival sheds the newest batch line.
  auto again = GenAs("i2", "carol", 0);
  EXPECT_EQ(again->fail_count(), 0);
  EXPECT_EQ(second->terminal().error().code(), kResourceExhausted);
  Done(0, 0, "run0");
  Done(0, 0, "run1");
  Done(0, 0, "run2");
  // The interactive ones first; the batch line once the replica holds less
  // than its share (limits.batch_reserve).
  EXPECT_THAT(Sent(), ElementsAre("i1", "i2"));
  for (int i = 3; i < kSlots; ++i) Done(0, 0, absl::StrCat("run", i));
  EXPECT_THAT(Sent(), ElementsAre("i1", "i2", "b1"));
  for (const char* id : {"i1", "i2", "b1"}) Done(0, 0, id);
}

// Work that can wait starts only within its share of stage 0: of the
// replica's capacity of 8, a reserve of 0.25 leaves it 6, so an interactive
// arrival still finds a slot at once; as those end, the batch goes on.
TEST_F(PipelineCoreQueueTest, BatchWorkLeavesTheReserveToInteractiveArrivals) {
  BuildOne();
  const auto batch = [this](const std::string& id) {
    v1::GenerateRequest request;
    request.set_request_id(id);
    request.set_prompt("Hi there");
    request.set_batch(true);
    auto sink = std::make_shared<FakeResponseSink>();
    sinks_.push_back(sink);
    core().Generate(std::move(request), sink, "", Caller::Of("alice"));
    return sink;
  };
  for (int i = 0; i < 8; ++i) batch(absl::StrCat("b", i));
  EXPECT_THAT(Sent(), ElementsAre("b0", "b1", "b2", "b3", "b4", "b5"));
  ClearLog();
  GenAs("i1", "bob");
  GenAs("i2", "bob");
  EXPECT_THAT(Sent(), ElementsAre("i1", "i2"));
  ClearLog();
  Done(0, 0, "b0");
  EXPECT_THAT(Sent(), IsEmpty());  // 7 held: i1 and i2 use the reserve
  Done(0, 0, "i1");
  Done(0, 0, "i2");
  EXPECT_THAT(Sent(), ElementsAre("b6"));
  for (const char* id : {"b1", "b2", "b3", "b4", "b5", "b6"}) Done(0, 0, id);
  EXPECT_THAT(Sent(), ElementsAre("b6", "b7"));
  Done(0, 0, "b7");
}

TEST_F(PipelineCoreQueueTest, AWaitPastTheBoundEndsWithRetryHint) {
  BuildOne();
  FillSlots();
  ClearLog();
  auto waiting = GenAs("w", "alice");
  scheduler_.AdvanceBy(absl::Seconds(29));
  EXPECT_EQ(waiting->end_count(), 0);
  scheduler_.AdvanceBy(absl::Seconds(2));
  ASSERT_EQ(waiting->terminal_count(), 1);
  EXPECT_EQ(waiting->terminal().error().code(), kResourceExhausted);
  EXPECT_THAT(waiting->terminal().error().message(),
              HasSubstr("in the admission queue (limits.max_queue_ms)"));
  EXPECT_THAT(Sent(), IsEmpty());
  for (int i = 0; i < kSlots; ++i) Done(0, 0, absl::StrCat("run", i));
  EXPECT_THAT(Sent(), IsEmpty());
}

TEST_F(PipelineCoreQueueTest, AbortAndCancelEndAQueuedRequestAtOnceWithoutAWorkerCall) {
  BuildOne();
  FillSlots();
  ClearLog();
  auto aborted = GenAs("aborted", "alice");
  auto cancelled = GenAs("cancelled", "alice");
  absl::StatusOr<v1::AbortResponse> response = AbortNow({"aborted"}, "alice");
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(aborted->terminal().finish_reason(), v1::FINISH_REASON_ABORT);
  core().Cancel("cancelled", cancelled.get());
  EXPECT_EQ(cancelled->terminal_count() + cancelled->fail_count(), 1);
  EXPECT_THAT(LogWith(".abort"), IsEmpty());
  // Neither leaves the queue later.
  for (int i = 0; i < kSlots; ++i) Done(0, 0, absl::StrCat("run", i));
  EXPECT_THAT(Sent(), IsEmpty());
}

// Found by the core fuzzer: a queued request whose abort waits on another
// request's worker call must not leave the queue for a worker meanwhile (it
// would end ABORT while bound there).
TEST_F(PipelineCoreQueueTest, AQueuedRequestBeingAbortedIsNotSent) {
  BuildOne();
  FillSlots();
  ClearLog();
  auto queued = GenAs("q", "alice");
  fake(0, 0).set_hold_aborts(true);
  v1::AbortRequest request;
  request.add_request_ids("run0");
  request.add_request_ids("q");
  absl::StatusOr<v1::AbortResponse> answer = absl::UnknownError("pending");
  core().Abort(
      request, absl::InfiniteFuture(),
      [&](absl::StatusOr<v1::AbortResponse> r) { answer = std::move(r); },
      Caller::Of("ops", /*admin=*/true, /*abort_any=*/true));
  Done(0, 0, "run1");  // A slot frees while the abort waits.
  EXPECT_THAT(Sent(), IsEmpty());
  ASSERT_TRUE(fake(0, 0).CompleteAbort(absl::OkStatus()));
  ASSERT_TRUE(answer.ok()) << answer.status();
  EXPECT_EQ(queued->terminal().finish_reason(), v1::FINISH_REASON_ABORT);
  EXPECT_THAT(Sent(), IsEmpty());
  for (int i = 2; i < kSlots; ++i) Done(0, 0, absl::StrCat("run", i));
}

TEST_F(PipelineCoreQueueTest, DrainingRefusesWhatWaitsAndLetsTheRestFinish) {
  BuildOne();
  FillSlots();
  ClearLog();
  auto waiting = GenAs("w", "alice");
  bool drained = false;
  core().Drain(scheduler_.Now() + absl::Seconds(10), [&] { drained = true; });
  ASSERT_EQ(waiting->terminal_count(), 1);
  EXPECT_EQ(waiting->terminal().error().code(), kUnavailable);
  EXPECT_THAT(waiting->terminal().error().message(), HasSubstr("try another one"));
  for (int i = 0; i < kSlots; ++i) Done(0, 0, absl::StrCat("run", i));
  EXPECT_TRUE(drained);
  EXPECT_THAT(Sent(), IsEmpty());
}

TEST_F(PipelineCoreQueueTest, StatusAndMetricsShowTheQueue) {
  BuildOne(/*max_queued=*/3);
  FillSlots();
  ClearLog();
  GenAs("a1", "alice", 3);
  GenAs("a2", "alice", 3);
  GenAs("b1", "bob", 0);
  auto refused = GenAs("c1", "carol", 0);  // Full, and nothing lower: refused.
  v1::PipelineStatus status = core().Status();
  ASSERT_EQ(status.queued_size(), 2);
  EXPECT_EQ(status.queued(0).priority(), 3);
  EXPECT_EQ(status.queued(0).identity(), "alice");
  EXPECT_EQ(status.queued(0).waiting(), 2);
  EXPECT_EQ(status.queued(1).identity(), "bob");
  scheduler_.AdvanceBy(absl::Seconds(2));
  Done(0, 0, "run0");  // a1 leaves after 2 s.
  core().SnapshotMetrics();
  const std::string metrics = core().metrics_registry().Render();
  EXPECT_THAT(metrics, HasSubstr("omnistage_admission_queued_requests{priority=\"3\"} 1"));
  EXPECT_THAT(metrics, HasSubstr("omnistage_admission_queued_requests{priority=\"0\"} 1"));
  EXPECT_THAT(metrics, HasSubstr("omnistage_admission_queued_requests{priority=\"9\"} 0"));
  EXPECT_THAT(metrics, HasSubstr("omnistage_admission_refusals_total{reason=\"full\"} 1"));
  EXPECT_THAT(metrics, HasSubstr("omnistage_admission_refusals_total{reason=\"shed\"} 0"));
  EXPECT_THAT(metrics, HasSubstr("omnistage_admission_queue_wait_seconds_count 1"));
  EXPECT_THAT(metrics, HasSubstr("omnistage_admission_queue_wait_seconds_sum 2"));
  LeaveOpen("the queue's state is the point");
}

TEST_F(PipelineCoreQueueTest, AnIdentitysRatesRefuseWithAHint) {
  BuildOne();
  auto Send = [&](const std::string& id, const RateLimits& limits) {
    v1::GenerateRequest request;
    request.set_request_id(id);
    request.set_prompt("Hi there");
    Caller caller;
    caller.identity = "alice";
    caller.rate_limits = limits;
    auto sink = std::make_shared<FakeResponseSink>();
    sinks_.push_back(sink);
    core().Generate(std::move(request), sink, "", caller);
    return sink;
  };
  // One request per second, no burst.
  const RateLimits one_per_second{1, 1, 0, 0};
  auto first = Send("r1", one_per_second);
  auto second = Send("r2", one_per_second);
  EXPECT_EQ(first->fail_count(), 0);
  EXPECT_EQ(second->fail_status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(second->fail_status().message()),
              HasSubstr("the requests of 'alice' exceed the 1 per second"));
  EXPECT_EQ(RetryAfterOf(second->fail_status()), absl::Seconds(1));
  scheduler_.AdvanceBy(absl::Seconds(1));
  auto third = Send("r3", one_per_second);
  EXPECT_EQ(third->fail_count(), 0);
  Done(0, 0, "r1");
  Done(0, 0, "r3");
  // 60 output tokens a minute, a burst of 5: a request that writes 8 words
  // leaves the identity 3 below empty, 3 s from the next request.
  const RateLimits tokens{0, 0, 60, 5};
  auto wordy = Send("w1", tokens);
  Done(0, 0, "w1", {Text("one two three four five six seven eight")});
  auto next = Send("w2", tokens);
  EXPECT_EQ(next->fail_status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(RetryAfterOf(next->fail_status()), absl::Seconds(3));
  scheduler_.AdvanceBy(absl::Seconds(3));
  auto later = Send("w3", tokens);
  EXPECT_EQ(later->fail_count(), 0);
  Done(0, 0, "w3");
  core().SnapshotMetrics();
  EXPECT_THAT(core().metrics_registry().Render(),
              HasSubstr("omnistage_admission_refusals_total{reason=\"rate_limited\"} 2"));
}

TEST_F(PipelineCoreQueueTest, OffItSendsEverythingAtOnce) {
  BuildOne(/*max_queued=*/0);
  for (int i = 0; i < 3 * kSlots; ++i) GenAs(absl::StrCat("r", i), "alice");
  EXPECT_EQ(Sent().size(), static_cast<size_t>(3 * kSlots));
  for (int i = 0; i < 3 * kSlots; ++i) Done(0, 0, absl::StrCat("r", i));
}

}  // namespace
}  // namespace pipeline_core_test
}  // namespace omnistage
