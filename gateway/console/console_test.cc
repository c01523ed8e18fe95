// The console's pieces without a server: the gateway's record of what it
// served, the status JSON the page reads, the embedded files.
#include <string>
#include <vector>

#include "gateway/console/assets.h"
#include "gateway/console/console_status.h"
#include "gateway/console/served_requests.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "protos/orchestrator.pb.h"

namespace omnistage {
namespace {

ServedRequest Served(const std::string& id, const std::string& outcome) {
  ServedRequest request;
  request.request_id = id;
  request.outcome = outcome;
  request.http_status = 200;
  request.duration_seconds = 0.5;
  request.finished_unix_ms = 1700000000000;
  return request;
}

TEST(ServedRequestsTest, KeepsTheNewestUpToItsCapacityAndCountsAll) {
  ServedRequests served(2);
  served.Add(Served("req-1", "stop"));
  served.Add(Served("req-2", "length"));
  served.Add(Served("req-3", "client_closed"));
  ASSERT_EQ(served.newest_first().size(), 2u);
  EXPECT_EQ(served.newest_first()[0].request_id, "req-3");
  EXPECT_EQ(served.newest_first()[1].request_id, "req-2");
  EXPECT_EQ(served.total(), 3);
}

TEST(ServedRequestsTest, CapacityIsAtLeastOne) {
  ServedRequests served(0);
  served.Add(Served("req-1", "stop"));
  EXPECT_EQ(served.newest_first().size(), 1u);
}

TEST(ConsoleStatusTest, ThePipelineAsProtobufJsonWithZerosBesideWhatTheGatewayServed) {
  v1::PipelineStatus pipeline;
  pipeline.set_node_id("n1");
  v1::StageStatus* stage = pipeline.add_stages();
  stage->set_name("talker");
  v1::ReplicaStatus* replica = stage->add_replicas();
  replica->set_replica(1);
  replica->set_state(v1::ReplicaStatus::STATE_DEAD);
  replica->set_capacity(64);
  ServedRequests served(10);
  ServedRequest spoken = Served("req-7", "stop");
  spoken.first_audio_seconds = 0.25;
  spoken.playback_stalls = 1;
  spoken.stalled_seconds = 0.125;
  served.Add(spoken);

  const nlohmann::json status = nlohmann::json::parse(ConsoleStatusJson(pipeline, served));
  const nlohmann::json& shown = status["pipeline"]["stages"][0];
  EXPECT_EQ(shown["name"], "talker");
  EXPECT_EQ(shown["replicas"][0]["state"], "STATE_DEAD");
  EXPECT_EQ(shown["replicas"][0]["capacity"], 64);
  // Zeros are printed: the page needs no defaults of its own.
  EXPECT_EQ(shown["replicas"][0]["boundRequests"], 0);
  EXPECT_EQ(status["pipeline"]["inFlightRequests"], 0);
  EXPECT_TRUE(status["pipeline"]["recent"].is_array());
  EXPECT_EQ(status["gateway"]["servedTotal"], 1);
  const nlohmann::json& recent = status["gateway"]["recent"][0];
  EXPECT_EQ(recent["requestId"], "req-7");
  EXPECT_EQ(recent["outcome"], "stop");
  EXPECT_EQ(recent["httpStatus"], 200);
  EXPECT_DOUBLE_EQ(recent["durationSeconds"].get<double>(), 0.5);
  EXPECT_EQ(recent["finishedUnixMs"], 1700000000000);
  EXPECT_DOUBLE_EQ(recent["firstAudioSeconds"].get<double>(), 0.25);
  EXPECT_EQ(recent["playbackStalls"], 1);
  EXPECT_DOUBLE_EQ(recent["stalledSeconds"].get<double>(), 0.125);
}

// The batches not finished, every owner's, with their counts; null when the
// gateway keeps none.
TEST(ConsoleStatusTest, TheBatchesRunningWithTheirCounts) {
  StoredBatch batch;
  batch.id = "batch_1";
  batch.owner = "alice";
  batch.endpoint = "/v1/chat/completions";
  batch.status = "in_progress";
  batch.created_at = 1700000000;
  batch.total = 100;
  batch.completed = 40;
  batch.failed = 1;
  const std::vector<StoredBatch> batches = {batch};
  ServedRequests served(10);
  const nlohmann::json status =
      nlohmann::json::parse(ConsoleStatusJson(v1::PipelineStatus(), served, &batches));
  const nlohmann::json& shown = status["batches"][0];
  EXPECT_EQ(shown["id"], "batch_1");
  EXPECT_EQ(shown["owner"], "alice");
  EXPECT_EQ(shown["status"], "in_progress");
  EXPECT_EQ(shown["createdAt"], 1700000000);
  EXPECT_EQ(shown["total"], 100);
  EXPECT_EQ(shown["completed"], 40);
  EXPECT_EQ(shown["failed"], 1);
  EXPECT_TRUE(
      nlohmann::json::parse(ConsoleStatusJson(v1::PipelineStatus(), served))["batches"].is_null());
}

TEST(ConsoleStatusTest, AnErrorThatIsNotUtf8IsReplacedNotThrownOn) {
  ServedRequests served(10);
  ServedRequest failed = Served("req-8", "error");
  failed.error = "bad byte \xff here";
  served.Add(failed);
  const nlohmann::json status =
      nlohmann::json::parse(ConsoleStatusJson(v1::PipelineStatus(), served));
  EXPECT_EQ(status["gateway"]["recent"][0]["outcome"], "error");
}

TEST(ConsoleAssetsTest, ThePageItsScriptAndStyleAreBuiltIn) {
  const ConsoleAsset* page = FindConsoleAsset("console.html");
  ASSERT_NE(page, nullptr);
  EXPECT_EQ(page->content_type, "text/html; charset=utf-8");
  EXPECT_NE(page->body.find("console.js"), std::string_view::npos);
  const ConsoleAsset* script = FindConsoleAsset("console.js");
  ASSERT_NE(script, nullptr);
  EXPECT_EQ(script->content_type, "text/javascript; charset=utf-8");
  ASSERT_NE(FindConsoleAsset("console.css"), nullptr);
  EXPECT_EQ(FindConsoleAsset("secrets.txt"), nullptr);
  EXPECT_EQ(FindConsoleAsset(""), nullptr);
}

}  // namespace
}  // namespace omnistage
