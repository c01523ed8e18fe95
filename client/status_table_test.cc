#include "client/status_table.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace omnistage {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

v1::ReplicaStatus* AddReplica(v1::StageStatus* stage, int index, const std::string& address,
                              v1::ReplicaStatus::State state) {
  v1::ReplicaStatus* r = stage->add_replicas();
  r->set_replica(index);
  r->set_address(address);
  r->set_state(state);
  r->set_alive(state != v1::ReplicaStatus::STATE_DEAD);
  r->set_capacity(64);
  r->set_load_age_ms(-1);
  return r;
}

// Two stages: a thinker with one busy replica, a talker with a live and a dead one.
v1::PipelineStatus TwoStages() {
  v1::PipelineStatus status;
  status.set_node_id("7f3a");
  status.set_accepting(true);
  status.set_in_flight_requests(2);
  v1::StageStatus* thinker = status.add_stages();
  thinker->set_stage_id(0);
  thinker->set_name("thinker");
  thinker->set_engine("thinker");
  v1::ReplicaStatus* busy =
      AddReplica(thinker, 0, "127.0.0.1:40123", v1::ReplicaStatus::STATE_LIVE);
  busy->set_load_requests(2);
  busy->set_load_age_ms(120);
  busy->set_bound_requests(2);
  v1::StageStatus* talker = status.add_stages();
  talker->set_stage_id(1);
  talker->set_name("talker");
  talker->set_engine("talker");
  AddReplica(talker, 0, "127.0.0.1:40124", v1::ReplicaStatus::STATE_LIVE);
  AddReplica(talker, 1, "127.0.0.1:40125", v1::ReplicaStatus::STATE_DEAD)
      ->set_last_error("connection refused");
  return status;
}

TEST(StatusTableTest, StagesAndReplicasInAlignedColumns) {
  EXPECT_EQ(FormatStatusTable(TwoStages()),
            "orchestrator 7f3a: accepting, 2 in flight, 0 queued\n"
            "\n"
            "stage 0 thinker (engine thinker)\n"
            "  replica  address          state  load  bound  last error\n"
            "  0        127.0.0.1:40123  live   2/64  2\n"
            "\n"
            "stage 1 talker (engine talker)\n"
            "  replica  address          state  load  bound  last error\n"
            "  0        127.0.0.1:40124  live   -/64  0\n"
            "  1        127.0.0.1:40125  dead   -/64  0      connection refused\n");
}

TEST(StatusTableTest, AStageOfWorkersAtFixedAddressesNamesNoEngine) {
  v1::PipelineStatus status = TwoStages();
  status.mutable_stages(1)->clear_engine();
  const std::string table = FormatStatusTable(status);
  EXPECT_THAT(table, HasSubstr("stage 1 talker\n  replica"));
  EXPECT_THAT(table, Not(HasSubstr("(engine )")));
}

TEST(StatusTableTest, ScalingLineOnlyWhenReported) {
  v1::PipelineStatus status = TwoStages();
  EXPECT_THAT(FormatStatusTable(status), Not(HasSubstr("scaling")));
  v1::StageScaling* s = status.mutable_stages(1)->mutable_scaling();
  s->set_held_requests(100);
  s->set_waiting_requests(28);
  s->set_live_replicas(1);
  s->set_capacity(64);
  s->set_saturation(2.0);
  s->set_arrivals_per_second(40);
  s->set_slot_seconds_per_request(2.5);
  s->set_demand_replicas(2.6);
  s->set_recommended_replicas(3);
  const std::string table = FormatStatusTable(status);
  EXPECT_THAT(table,
              HasSubstr("stage 1 talker (engine talker)\n"
                        "  scaling: saturation 2.00 (100 held, 28 waiting, capacity 64 on 1 "
                        "live); recommended replicas 3 (demand 2.60: 40.00 req/s x 2.500 s a "
                        "slot)\n"
                        "  replica  address"));
  // Stage 0 reported none.
  EXPECT_THAT(table, HasSubstr("stage 0 thinker (engine thinker)\n  replica"));
}

TEST(StatusTableTest, AudioLineOnceTheStageHeldAudio) {
  v1::PipelineStatus status = TwoStages();
  v1::StageScaling* s = status.mutable_stages(1)->mutable_scaling();
  s->set_recommended_replicas(1);
  EXPECT_THAT(FormatStatusTable(status), Not(HasSubstr("audio:")));
  s->set_audio_requests(12);
  EXPECT_THAT(FormatStatusTable(status),
              HasSubstr("slot)\n  audio: 12 request(s); capacity not measured yet\n  replica"));
  s->set_audio_capacity_known(true);
  s->set_audio_stream_capacity(19.6);
  s->set_audio_demand_replicas(0.77);
  EXPECT_THAT(FormatStatusTable(status),
              HasSubstr("  audio: 12 request(s); capacity 20 streams at real time (demand 0.77 "
                        "replicas)\n"));
  s->set_audio_limited(true);
  EXPECT_THAT(FormatStatusTable(status),
              HasSubstr("capacity 20 streams at real time, limits the pipeline (demand"));
}

TEST(StatusTableTest, LongErrorsAreCutToOneLine) {
  v1::PipelineStatus status = TwoStages();
  status.mutable_stages(1)->mutable_replicas(1)->set_last_error(
      "failed to connect to all addresses; last error: UNKNOWN: ipv4:127.0.0.1:40125:\n"
      "Failed to connect to remote host: Connection refused");
  const std::string table = FormatStatusTable(status);
  EXPECT_THAT(table, HasSubstr("dead   -/64  0      failed to connect to all addresses; last "
                               "error: UNKNOWN:...\n"));
  EXPECT_THAT(table, Not(HasSubstr("Connection refused")));
  std::string line = table.substr(table.find("  1        127.0.0.1:40125"));
  line = line.substr(0, line.find('\n'));
  EXPECT_LE(line.size(), 2 + 9 + 17 + 7 + 6 + 7 + kMaxErrorChars);
}

TEST(StatusTableTest, DrainingRetiringAndUnreported) {
  v1::PipelineStatus status = TwoStages();
  status.set_accepting(false);
  status.mutable_stages(1)->mutable_replicas(0)->set_state(v1::ReplicaStatus::STATE_DRAINING);
  status.mutable_stages(1)->mutable_replicas(1)->set_state(v1::ReplicaStatus::STATE_DRAINING);
  status.mutable_stages(1)->mutable_replicas(1)->set_retiring(true);
  status.mutable_stages(0)->set_discovery_error("lookup of omnistage-thinker failed: NXDOMAIN");
  status.mutable_stages(0)->clear_replicas();
  const std::string table = FormatStatusTable(status);
  EXPECT_THAT(table, HasSubstr("orchestrator 7f3a: draining (not accepting), 2 in flight"));
  EXPECT_THAT(table, HasSubstr("  discovery: lookup of omnistage-thinker failed: NXDOMAIN\n"
                               "  no replicas\n"));
  EXPECT_THAT(table, HasSubstr("  0        127.0.0.1:40124  draining  -/64"));
  EXPECT_THAT(table, HasSubstr("  1        127.0.0.1:40125  retiring  -/64"));
}

TEST(StatusTableTest, QueueClusterAndInvariants) {
  v1::PipelineStatus status = TwoStages();
  v1::QueuedRequests* q = status.add_queued();
  q->set_priority(9);
  q->set_identity("alice");
  q->set_waiting(2);
  q = status.add_queued();
  q->set_priority(0);
  q->set_waiting(1);
  q = status.add_queued();
  q->set_priority(-1);  // a batch's lines
  q->set_identity("bob");
  q->set_waiting(4);
  status.set_invariant_violations(1);
  status.set_cluster(true);
  v1::OrchestratorStatus* self = status.add_orchestrators();
  self->set_node_id("7f3a");
  self->set_reachable(true);
  self->set_accepting(true);
  self->set_in_flight_requests(2);
  v1::OrchestratorStatus* peer = status.add_orchestrators();
  peer->set_peer_address("10.0.0.2:50061");
  peer->set_error("deadline exceeded");
  const std::string table = FormatStatusTable(status);
  EXPECT_THAT(table, HasSubstr("2 in flight, 7 queued (priority 9 alice: 2, priority 0 "
                               "(anonymous): 1, batch bob: 4)\n"
                               "invariant violations: 1 (a bug of omnistage: see its log)\n"
                               "orchestrators:\n"
                               "  node id  peer address    reachable  in flight  accepting  "
                               "error\n"
                               "  7f3a     (this one)      yes        2          yes\n"
                               "  ?        10.0.0.2:50061  no         -          -          "
                               "deadline exceeded\n"));
}

// The requests the orchestrator finished last, newest first, at most
// kRecentShown of them, each with the replica of every stage it ran on.
TEST(StatusTableTest, RecentRequestsNewestFirst) {
  v1::PipelineStatus status = TwoStages();
  EXPECT_THAT(FormatStatusTable(status), Not(HasSubstr("recent requests")));
  for (int i = 7; i > 0; --i) {
    v1::FinishedRequest* r = status.add_recent();
    r->set_request_id(absl::StrCat("req-", i));
    r->set_finish_reason(v1::FINISH_REASON_STOP);
    r->set_first_output_seconds(0.02);
    r->set_duration_seconds(1.5);
    v1::StageReplica* thinker = r->add_stages();
    thinker->set_stage_id(0);
    v1::StageReplica* talker = r->add_stages();
    talker->set_stage_id(1);
    talker->set_replica(1);
  }
  v1::FinishedRequest* failed = status.mutable_recent(0);
  failed->set_identity("alice");
  failed->set_finish_reason(v1::FINISH_REASON_ERROR);
  failed->set_first_output_seconds(-1);
  failed->set_error("UNAVAILABLE: stage 1 (talker) replica 1: gone");
  // Audio: its first, and how a listener heard it.
  status.mutable_recent(1)->set_audio_seconds(2);
  status.mutable_recent(1)->set_first_audio_seconds(0.25);
  v1::FinishedRequest* stalled = status.mutable_recent(2);
  stalled->set_audio_seconds(2);
  stalled->set_first_audio_seconds(0.3);
  stalled->set_playback_stalls(2);
  stalled->set_stalled_seconds(0.125);
  const std::string text = FormatStatusTable(status);
  EXPECT_THAT(text, HasSubstr("recent requests (newest first, 5 of 7):\n"
                              "  request  identity  finish  first output  first audio  stalls"
                              "      duration  stages              error\n"
                              "  req-7    alice     error   -             -            -"
                              "           1500 ms   "
                              "thinker:0,talker:1  UNAVAILABLE: stage 1 (talker) replica 1: gone\n"
                              "  req-6    -         stop    20 ms         250 ms       0"
                              "           1500 ms   thinker:0,talker:1\n"
                              "  req-5    -         stop    20 ms         300 ms       2 (125 ms)"
                              "  1500 ms   thinker:0,talker:1\n"));
  EXPECT_THAT(text, HasSubstr("req-3"));
  EXPECT_THAT(text, Not(HasSubstr("req-2")));
}

// The audio line: only once audio played or the capacity is measured.
TEST(StatusTableTest, AudioStreamsAndTheirCapacity) {
  v1::PipelineStatus status = TwoStages();
  EXPECT_THAT(FormatStatusTable(status), Not(HasSubstr("audio:")));
  status.mutable_audio()->set_playing(12);
  status.mutable_audio()->set_seconds_per_audio_second(0.4321);
  EXPECT_THAT(FormatStatusTable(status),
              HasSubstr("\naudio: 12 stream(s) playing (0.43 s to make a second of each); "
                        "capacity not measured yet\n"));
  status.mutable_audio()->set_capacity_known(true);
  status.mutable_audio()->set_capacity_streams(62.2);
  status.mutable_audio()->set_admission_limit(55);
  EXPECT_THAT(FormatStatusTable(status),
              HasSubstr("capacity 62 streams at real time, new audio requests wait at 55\n"));
}

}  // namespace
}  // namespace omnistage
