// Tests for the playback deadlines PipelineCore passes on (deadline_relay.h):
// none before a request's first audio; then, each time its audio moves its
// listener's deadline by 250 ms or more, one to every stage still running it,
// saying how long is left; none to a replica that does not take them. Fakes
// only, on a manual clock; every test ends with the invariant check.
#include <string>
#include <vector>

#include "orchestrator/core/pipeline_core.h"
#include "orchestrator/core/testing/pipeline_core_harness.h"

namespace omnistage {
namespace pipeline_core_test {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

// `ms` of 24 kHz mono 16-bit audio.
v1::Payload AudioMs(int ms) { return Audio(std::string(static_cast<size_t>(ms) * 48, '\0')); }

// The slack of each deadline `fake` got for `id`, in ms, in order.
std::vector<int64_t> Slacks(const FakeReplicaClient& fake, const std::string& id) {
  std::vector<int64_t> slacks;
  for (const v1::PlaybackDeadlines& sent : fake.deadlines()) {
    for (const v1::PlaybackDeadline& d : sent.deadlines()) {
      if (d.request_id() == id) slacks.push_back(d.slack_ms());
    }
  }
  return slacks;
}

TEST_F(PipelineCoreTest, AudioTellsTheStagesRunningTheRequestWhenItsListenerRunsOut) {
  playback_deadlines_ = true;
  Build(Shape().TalkerInput(InputMode::kStreaming));
  auto sink = Gen("r", {v1::MODALITY_AUDIO});
  Out(0, 0, "r", {Text("Hello there.")});
  Out(1, 0, "r", {Codes({1, 2, 3})});
  // Not playing yet: no stage hears a deadline (each treats it as the most
  // urgent).
  EXPECT_THAT(LogWith(".deadlines"), IsEmpty());

  Out(2, 0, "r", {AudioMs(1000)});
  EXPECT_THAT(LogWith(".deadlines"),
              ElementsAre("T0.deadlines 1", "K0.deadlines 1", "W0.deadlines 1"));
  EXPECT_THAT(Slacks(fake(2, 0), "r"), ElementsAre(1000));

  // 300 ms later, 40 ms more: the deadline moved 40 ms, too little to say.
  scheduler_.AdvanceBy(absl::Milliseconds(300));
  Out(2, 0, "r", {AudioMs(40)});
  EXPECT_EQ(fake(2, 0).deadlines().size(), 1u);
  // 240 ms more: 280 ms since the stages last heard it; 980 ms left.
  Out(2, 0, "r", {AudioMs(240)});
  EXPECT_THAT(Slacks(fake(2, 0), "r"), ElementsAre(1000, 980));
  EXPECT_THAT(Slacks(fake(0, 0), "r"), ElementsAre(1000, 980));

  // The thinker finished: only the stages still running it hear more.
  Done(0, 0, "r", {Text(" Bye.")});
  Done(1, 0, "r", {Codes({4})});
  ClearLog();
  Out(2, 0, "r", {AudioMs(500)});
  EXPECT_THAT(LogWith(".deadlines"), ElementsAre("W0.deadlines 1"));
  EXPECT_THAT(Slacks(fake(2, 0), "r"), ElementsAre(1000, 980, 1480));
  Done(2, 0, "r");
  EXPECT_EQ(sink->terminal_count(), 1);
}

// A listener who ran out hears the stall as a deadline already past: the
// stages get it as it is (more audio makes it the next one).
TEST_F(PipelineCoreTest, AStallingListenersDeadlineIsSentAsItComes) {
  playback_deadlines_ = true;
  Build(Shape().TalkerInput(InputMode::kStreaming));
  auto sink = Gen("r", {v1::MODALITY_AUDIO});
  Out(0, 0, "r", {Text("Hello.")});
  Out(1, 0, "r", {Codes({1})});
  Out(2, 0, "r", {AudioMs(200)});
  scheduler_.AdvanceBy(absl::Seconds(1));  // ran out 800 ms ago
  Out(2, 0, "r", {AudioMs(200)});
  EXPECT_THAT(Slacks(fake(2, 0), "r"), ElementsAre(200, 200));
  Done(0, 0, "r");
  Done(1, 0, "r");
  Done(2, 0, "r");
}

TEST_F(PipelineCoreTest, AReplicaThatDoesNotTakeDeadlinesHearsNone) {
  Build(Shape().TalkerInput(InputMode::kStreaming));  // playback_deadlines_ false
  auto sink = Gen("r", {v1::MODALITY_AUDIO});
  Out(0, 0, "r", {Text("Hello.")});
  Out(1, 0, "r", {Codes({1})});
  Out(2, 0, "r", {AudioMs(1000)});
  EXPECT_THAT(LogWith(".deadlines"), IsEmpty());
  Done(0, 0, "r");
  Done(1, 0, "r");
  Done(2, 0, "r");
}

// Text alone plays nothing: no deadline.
TEST_F(PipelineCoreTest, ARequestWithoutAudioHasNoDeadline) {
  playback_deadlines_ = true;
  Build();
  auto sink = Gen("r", {v1::MODALITY_TEXT});
  Done(0, 0, "r", {Text("Hello.")});
  EXPECT_THAT(LogWith(".deadlines"), IsEmpty());
  EXPECT_EQ(sink->terminal_count(), 1);
}

}  // namespace
}  // namespace pipeline_core_test
}  // namespace omnistage
