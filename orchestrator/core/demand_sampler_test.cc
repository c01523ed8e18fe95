#include "orchestrator/core/demand_sampler.h"

#include <optional>
#include <vector>

#include "common/testing/manual_scheduler.h"
#include "gtest/gtest.h"

namespace omnistage {
namespace {

class DemandSamplerTest : public ::testing::Test {
 protected:
  DemandSamplerTest() { scaling_.sample_interval = absl::Seconds(1); }

  DemandSampler& Make() {
    sampler_.emplace(1, scaling_, &scheduler_, [this] {
      ++samples_;
      DemandSampler::Observed observed;
      StageLoad load;
      load.held = held_;
      load.live_replicas = 1;
      load.capacity = 4;
      load.slots_per_replica = 4;
      load.entries = entries_;
      load.departures = entries_ - static_cast<uint64_t>(held_);
      busy_ += held_ * 1.0;  // Held over the last second.
      load.busy_slot_seconds = busy_;
      observed.loads.push_back(load);
      observed.idle = held_ == 0;
      observed.draining = draining_;
      return observed;
    });
    return *sampler_;
  }

  // One request enters and stays.
  void Enter() {
    sampler_->Arrived();
    ++entries_;
    ++held_;
  }

  ScalingConfig scaling_;
  ManualScheduler scheduler_;
  std::optional<DemandSampler> sampler_;
  int samples_ = 0;
  int held_ = 0;
  uint64_t entries_ = 0;
  double busy_ = 0;
  bool draining_ = false;
};

TEST_F(DemandSamplerTest, SamplesEveryIntervalWhileRequestsRun) {
  DemandSampler& sampler = Make();
  Enter();
  scheduler_.AdvanceBy(absl::Seconds(5));
  EXPECT_EQ(samples_, 5);
  EXPECT_TRUE(sampler.sampling());
  EXPECT_EQ(sampler.demand().Signal(0).held_requests(), 1);
}

TEST_F(DemandSamplerTest, PausesWhileIdleWithNothingToDecayAndResumesAtTheNextArrival) {
  DemandSampler& sampler = Make();
  scheduler_.AdvanceBy(absl::Seconds(1));  // Nothing ever ran: quiet at once.
  EXPECT_EQ(samples_, 1);
  EXPECT_FALSE(sampler.sampling());
  scheduler_.AdvanceBy(absl::Seconds(60));
  EXPECT_EQ(samples_, 1);
  Enter();
  EXPECT_TRUE(sampler.sampling());
  scheduler_.AdvanceBy(absl::Seconds(2));
  EXPECT_EQ(samples_, 3);
}

TEST_F(DemandSamplerTest, KeepsSamplingWhileWhatWasMeasuredDecays) {
  DemandSampler& sampler = Make();
  Enter();
  scheduler_.AdvanceBy(absl::Seconds(10));
  held_ = 0;  // The request ends: idle, but the averages still hold it.
  scheduler_.AdvanceBy(absl::Seconds(5));
  EXPECT_TRUE(sampler.sampling());
  EXPECT_FALSE(sampler.demand().Quiet());
  // Long after (many windows), nothing is left and sampling pauses.
  scheduler_.AdvanceBy(absl::Seconds(30 * 60));
  EXPECT_FALSE(sampler.sampling());
  const int paused_at = samples_;
  scheduler_.AdvanceBy(absl::Seconds(60));
  EXPECT_EQ(samples_, paused_at);
}

TEST_F(DemandSamplerTest, DrainingAndIdlePausesAtOnce) {
  DemandSampler& sampler = Make();
  Enter();
  scheduler_.AdvanceBy(absl::Seconds(10));
  held_ = 0;
  draining_ = true;
  scheduler_.AdvanceBy(absl::Seconds(1));
  EXPECT_FALSE(sampler.sampling());
}

TEST_F(DemandSamplerTest, GoingIdleIsHeardOncePerIdlePeriod) {
  DemandSampler& sampler = Make();
  int heard = 0;
  sampler.set_on_idle([&heard] { ++heard; });
  Enter();
  scheduler_.AdvanceBy(absl::Seconds(3));
  held_ = 0;
  // The arrival was three samples ago: the first idle sample is settled.
  scheduler_.AdvanceBy(absl::Seconds(1));
  EXPECT_EQ(heard, 1);
  scheduler_.AdvanceBy(absl::Seconds(20));
  EXPECT_EQ(heard, 1);
  // A request that comes and goes between two samples: the next idle sample
  // saw an arrival, the one after hears the new idle period.
  Enter();
  held_ = 0;
  scheduler_.AdvanceBy(absl::Seconds(1));
  EXPECT_EQ(heard, 1);
  scheduler_.AdvanceBy(absl::Seconds(1));
  EXPECT_EQ(heard, 2);
}

TEST_F(DemandSamplerTest, NothingRunsAfterTheSamplerIsGone) {
  Make();
  Enter();
  sampler_.reset();
  EXPECT_EQ(scheduler_.pending(), 0u);
  scheduler_.AdvanceBy(absl::Seconds(5));
  EXPECT_EQ(samples_, 0);
}

}  // namespace
}  // namespace omnistage
