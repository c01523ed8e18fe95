#include "orchestrator/peers/cluster_status.h"

#include "gtest/gtest.h"

namespace omnistage {
namespace {

v1::PipelineStatus StatusWith(const std::string& node, int in_flight, int64_t load_age_ms,
                              int load) {
  v1::PipelineStatus status;
  status.set_node_id(node);
  status.set_in_flight_requests(in_flight);
  status.set_accepting(true);
  v1::StageStatus* stage = status.add_stages();
  stage->set_stage_id(0);
  v1::ReplicaStatus* replica = stage->add_replicas();
  replica->set_address("10.0.1.1:50061");
  replica->set_load_age_ms(load_age_ms);
  replica->set_load_requests(load);
  return status;
}

PeerAnswer Answer(const std::string& address, v1::PipelineStatus status) {
  v1::PeerStatusResponse response;
  response.set_node_id(status.node_id());
  *response.mutable_status() = std::move(status);
  return {PeerInfo{address, response.node_id(), ""}, response};
}

TEST(ClusterStatusTest, ListsEveryOrchestratorAndTakesTheFreshestLoad) {
  std::vector<PeerAnswer> answers = {
      Answer("10.0.0.2:50052", StatusWith("00000000000b", 7, 3, 12)),
      {PeerInfo{"10.0.0.3:50052", "00000000000c", ""},
       absl::DeadlineExceededError("peer 10.0.0.3:50052: Deadline Exceeded")},
  };
  v1::PipelineStatus merged = MergeClusterStatus(StatusWith("00000000000a", 2, 40, 9), answers);
  EXPECT_TRUE(merged.cluster());
  ASSERT_EQ(merged.orchestrators_size(), 3);
  EXPECT_EQ(merged.orchestrators(0).node_id(), "00000000000a");
  EXPECT_EQ(merged.orchestrators(0).in_flight_requests(), 2);
  EXPECT_TRUE(merged.orchestrators(0).reachable());
  EXPECT_EQ(merged.orchestrators(1).peer_address(), "10.0.0.2:50052");
  EXPECT_EQ(merged.orchestrators(1).in_flight_requests(), 7);
  EXPECT_FALSE(merged.orchestrators(2).reachable());
  EXPECT_EQ(merged.orchestrators(2).node_id(), "00000000000c");
  EXPECT_NE(merged.orchestrators(2).error().find("Deadline"), std::string::npos);
  const v1::ReplicaStatus& replica = merged.stages(0).replicas(0);
  EXPECT_EQ(replica.load_requests(), 12);  // b heard 3 ms ago; a 40 ms ago.
  EXPECT_EQ(replica.load_age_ms(), 3);
  EXPECT_EQ(replica.load_seen_by(), "00000000000b");
}

TEST(ClusterStatusTest, OwnLoadStandsWhenFresherOrAlone) {
  v1::PipelineStatus merged = MergeClusterStatus(
      StatusWith("00000000000a", 0, 1, 4), {Answer("10.0.0.2:50052", StatusWith("b", 0, -1, 0))});
  EXPECT_EQ(merged.stages(0).replicas(0).load_requests(), 4);
  EXPECT_EQ(merged.stages(0).replicas(0).load_seen_by(), "00000000000a");
  v1::PipelineStatus alone = MergeClusterStatus(StatusWith("00000000000a", 1, -1, 0), {});
  ASSERT_EQ(alone.orchestrators_size(), 1);
  EXPECT_EQ(alone.stages(0).replicas(0).load_seen_by(), "");
}

}  // namespace
}  // namespace omnistage
