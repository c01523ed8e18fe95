#include "client/batches_command.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace omnistage {
namespace {

using ::testing::HasSubstr;

TEST(BatchesTableTest, EachBatchWithItsCounts) {
  const nlohmann::json batches = nlohmann::json::parse(R"([
      {"id": "batch_1", "owner": "alice", "endpoint": "/v1/chat/completions",
       "status": "in_progress", "createdAt": 1796656811, "total": 100, "completed": 40,
       "failed": 1},
      {"id": "batch_22", "owner": "", "endpoint": "/v1/audio/speech",
       "status": "cancelling", "createdAt": 1796656812, "total": 5, "completed": 0,
       "failed": 0}])");
  const std::string table = FormatBatchesTable(batches);
  EXPECT_THAT(table, HasSubstr("batch     owner        endpoint              status       done    "
                               "failed  created\n"));
  EXPECT_THAT(table, HasSubstr("batch_1   alice        /v1/chat/completions  in_progress  40/100  "
                               "1       2026-12-07 15:20:11\n"));
  EXPECT_THAT(table, HasSubstr("batch_22  (anonymous)  /v1/audio/speech      cancelling   0/5"));
}

TEST(BatchesTableTest, SaysWhyThereAreNone) {
  EXPECT_EQ(FormatBatchesTable(nlohmann::json::array()), "no batch running\n");
  EXPECT_THAT(FormatBatchesTable(nlohmann::json()), HasSubstr("--batch_database"));
}

}  // namespace
}  // namespace omnistage
