#include "gateway/batch/batch_store.h"

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gateway/batch/batch_lines.h"
#include "gateway/batch/file_store.h"
#include "gateway/batch/test_store.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace omnistage {
namespace {

const absl::Time kNow = absl::FromUnixSeconds(1800000000);

std::vector<BatchInputLine> Lines(int n) {
  std::vector<BatchInputLine> lines;
  for (int i = 1; i <= n; ++i) lines.push_back({i, absl::StrCat("q", i), "{}"});
  return lines;
}

// The custom_ids of a JSONL file's lines, in order.
std::vector<std::string> CustomIds(const std::string& jsonl) {
  std::vector<std::string> ids;
  for (absl::string_view line : absl::StrSplit(jsonl, '\n', absl::SkipEmpty())) {
    ids.push_back(nlohmann::json::parse(line)["custom_id"]);
  }
  return ids;
}

std::string Result(const ClaimedLine& line) {
  return nlohmann::json{{"custom_id", line.custom_id}, {"response", {{"status_code", 200}}}}.dump();
}

class BatchStoreTest : public testing::Test {
 protected:
  void SetUp() override {
    db_ = OpenTestStore(
        absl::StrCat(testing::UnitTest::GetInstance()->current_test_info()->name(), ".db"));
    ASSERT_NE(db_, nullptr);
  }

  std::unique_ptr<SqliteDatabase> db_;
};

TEST_F(BatchStoreTest, ABatchIsItsOwnersAlone) {
  BatchStore batches(db_.get());
  absl::StatusOr<StoredBatch> batch = batches.Create("alice", "file-1", "/v1/chat/completions",
                                                     "24h", R"({"k":"v"})", Lines(3), kNow);
  ASSERT_TRUE(batch.ok()) << batch.status();
  EXPECT_EQ(batch->id.rfind("batch_", 0), 0u);
  EXPECT_EQ(batch->status, "in_progress");
  EXPECT_EQ(batch->total, 3);
  EXPECT_EQ(batch->expires_at - batch->created_at, 24 * 3600);
  EXPECT_EQ(batches.Get("alice", batch->id)->metadata, R"({"k":"v"})");
  EXPECT_EQ(batches.Get("bob", batch->id).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(batches.Cancel("bob", batch->id, kNow).status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(batches.List("bob", "", 10)->empty());
  ASSERT_TRUE(batches
                  .Create("alice", "file-1", "/v1/chat/completions", "1h", "null", Lines(1),
                          kNow + absl::Seconds(1))
                  .ok());
  absl::StatusOr<std::vector<StoredBatch>> all = batches.List("alice", "", 10);
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[1].id, batch->id);  // newest first
  EXPECT_EQ(batches.List("alice", (*all)[0].id, 10)->size(), 1u);
  EXPECT_EQ(batches.Create("alice", "f", "/v1/chat/completions", "2 days", "null", Lines(1), kNow)
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

// Every line ends in exactly one of the two files, once, in input order; the
// counts follow each result.
TEST_F(BatchStoreTest, EveryLineEndsInOneFileOnce) {
  BatchStore batches(db_.get());
  BatchLines lines(db_.get());
  absl::StatusOr<StoredBatch> batch =
      batches.Create("alice", "file-1", "/v1/chat/completions", "24h", "null", Lines(5), kNow);
  ASSERT_TRUE(batch.ok());
  absl::StatusOr<std::vector<ClaimedLine>> claimed = lines.Claim(10);
  ASSERT_EQ(claimed->size(), 5u);
  EXPECT_EQ((*claimed)[0].owner, "alice");
  EXPECT_EQ((*claimed)[0].endpoint, "/v1/chat/completions");
  EXPECT_TRUE(lines.Claim(10)->empty());  // all running
  EXPECT_TRUE(batches.Finish(kNow)->empty());
  for (const ClaimedLine& line : *claimed) {
    EXPECT_TRUE(*lines.Record(line.batch_id, line.line, line.line != 2, Result(line)));
  }
  // Once: a second record of a line is refused, and nothing changes.
  EXPECT_FALSE(*lines.Record(batch->id, 1, true, "{}"));
  absl::StatusOr<std::vector<StoredBatch>> finished = batches.Finish(kNow + absl::Seconds(5));
  ASSERT_EQ(finished->size(), 1u);
  const StoredBatch& done = finished->front();
  EXPECT_EQ(done.status, "completed");
  EXPECT_EQ(done.completed, 4);
  EXPECT_EQ(done.failed, 1);
  EXPECT_EQ(done.completed_at, absl::ToUnixSeconds(kNow) + 5);
  FileStore files(db_.get());
  EXPECT_EQ(CustomIds(*files.Content("alice", done.output_file_id)),
            (std::vector<std::string>{"q1", "q3", "q4", "q5"}));
  EXPECT_EQ(CustomIds(*files.Content("alice", done.error_file_id)),
            (std::vector<std::string>{"q2"}));
  EXPECT_EQ(files.Get("alice", done.output_file_id)->purpose, "batch_output");
  EXPECT_TRUE(batches.Finish(kNow)->empty());  // finished once
}

// Killed with lines running: at the next start they wait again, run, and
// each is recorded once; a line recorded before the kill is not run again.
TEST_F(BatchStoreTest, LinesRunningAtAKillRunAgainOnlyIfUnrecorded) {
  const std::string path = "kill.db";
  std::string id;
  {
    std::unique_ptr<SqliteDatabase> db = OpenTestStore(path);
    absl::StatusOr<StoredBatch> batch = BatchStore(db.get()).Create(
        "alice", "f", "/v1/chat/completions", "24h", "null", Lines(3), kNow);
    id = batch->id;
    BatchLines lines(db.get());
    absl::StatusOr<std::vector<ClaimedLine>> claimed = lines.Claim(2);
    ASSERT_EQ(claimed->size(), 2u);
    ASSERT_TRUE(*lines.Record(id, (*claimed)[0].line, true, Result((*claimed)[0])));
    // The process dies here: line 2 running, line 3 waiting.
  }
  std::unique_ptr<SqliteDatabase> db = OpenTestStore(path);
  BatchLines lines(db.get());
  EXPECT_EQ(*lines.Requeue(), 1);
  absl::StatusOr<std::vector<ClaimedLine>> again = lines.Claim(10);
  ASSERT_EQ(again->size(), 2u);
  EXPECT_EQ((*again)[0].line, 2);
  EXPECT_EQ((*again)[1].line, 3);
  for (const ClaimedLine& line : *again)
    ASSERT_TRUE(*lines.Record(id, line.line, true, Result(line)));
  absl::StatusOr<std::vector<StoredBatch>> finished = BatchStore(db.get()).Finish(kNow);
  ASSERT_EQ(finished->size(), 1u);
  EXPECT_EQ(CustomIds(*FileStore(db.get()).Content("alice", finished->front().output_file_id)),
            (std::vector<std::string>{"q1", "q2", "q3"}));
}

TEST_F(BatchStoreTest, ACancelledBatchRunsNothingMoreAndEndsOnceItsRunningLinesDo) {
  BatchStore batches(db_.get());
  BatchLines lines(db_.get());
  absl::StatusOr<StoredBatch> batch =
      batches.Create("alice", "f", "/v1/chat/completions", "24h", "null", Lines(4), kNow);
  absl::StatusOr<std::vector<ClaimedLine>> claimed = lines.Claim(2);  // q1, q2 running
  absl::StatusOr<StoredBatch> cancelling = batches.Cancel("alice", batch->id, kNow);
  EXPECT_EQ(cancelling->status, "cancelling");
  EXPECT_TRUE(lines.Claim(10)->empty());
  EXPECT_TRUE(batches.Finish(kNow)->empty());  // q1, q2 still running
  ASSERT_TRUE(*lines.Record(batch->id, 1, true, Result((*claimed)[0])));
  ASSERT_TRUE(lines.Retry(batch->id, 2).ok());  // refused meanwhile: never runs now
  absl::StatusOr<std::vector<StoredBatch>> finished = batches.Finish(kNow);
  ASSERT_EQ(finished->size(), 1u);
  EXPECT_EQ(finished->front().status, "cancelled");
  EXPECT_EQ(finished->front().completed, 1);
  FileStore files(db_.get());
  EXPECT_EQ(CustomIds(*files.Content("alice", finished->front().output_file_id)),
            (std::vector<std::string>{"q1"}));
  const std::string errors = *files.Content("alice", finished->front().error_file_id);
  EXPECT_EQ(CustomIds(errors), (std::vector<std::string>{"q2", "q3", "q4"}));
  EXPECT_NE(errors.find("batch_cancelled"), std::string::npos);
  EXPECT_EQ(batches.Cancel("alice", batch->id, kNow)->status, "cancelled");
  EXPECT_TRUE(batches.Unfinished(10)->empty());
}

TEST_F(BatchStoreTest, ABatchOutOfTimeExpiresWithWhatRan) {
  BatchStore batches(db_.get());
  BatchLines lines(db_.get());
  absl::StatusOr<StoredBatch> batch =
      batches.Create("alice", "f", "/v1/chat/completions", "10s", "null", Lines(3), kNow);
  absl::StatusOr<std::vector<ClaimedLine>> claimed = lines.Claim(1);
  ASSERT_TRUE(*lines.Record(batch->id, 1, true, Result((*claimed)[0])));
  EXPECT_TRUE(batches.Finish(kNow + absl::Seconds(9))->empty());
  absl::StatusOr<std::vector<StoredBatch>> finished = batches.Finish(kNow + absl::Seconds(10));
  ASSERT_EQ(finished->size(), 1u);
  EXPECT_EQ(finished->front().status, "expired");
  EXPECT_GT(finished->front().expired_at, 0);
  const std::string errors =
      *FileStore(db_.get()).Content("alice", finished->front().error_file_id);
  EXPECT_EQ(CustomIds(errors), (std::vector<std::string>{"q2", "q3"}));
  EXPECT_NE(errors.find("batch_expired"), std::string::npos);
}

// Claims go round the batches waiting, so one large batch does not hold
// back another's lines.
TEST_F(BatchStoreTest, ClaimsShareOutOverTheBatchesWaiting) {
  BatchStore batches(db_.get());
  BatchLines lines(db_.get());
  absl::StatusOr<StoredBatch> big =
      batches.Create("alice", "f", "/v1/chat/completions", "24h", "null", Lines(100), kNow);
  absl::StatusOr<StoredBatch> small = batches.Create("bob", "g", "/v1/chat/completions", "24h",
                                                     "null", Lines(2), kNow + absl::Seconds(1));
  absl::StatusOr<std::vector<ClaimedLine>> claimed = lines.Claim(6);
  ASSERT_EQ(claimed->size(), 5u);  // alice 3, bob his 2
  std::map<std::string, int> by_batch;
  for (const ClaimedLine& line : *claimed) ++by_batch[line.batch_id];
  EXPECT_EQ(by_batch[big->id], 3);
  EXPECT_EQ(by_batch[small->id], 2);
  EXPECT_EQ(*lines.Running(), 5);
  // The console's view: every owner's, oldest first.
  absl::StatusOr<std::vector<StoredBatch>> unfinished = batches.Unfinished(10);
  ASSERT_EQ(unfinished->size(), 2u);
  EXPECT_EQ((*unfinished)[0].owner, "alice");
  EXPECT_EQ((*unfinished)[1].owner, "bob");
}

// A result the store cannot take (here: a database held to its pages) fails
// its line with result_not_stored, in the error file; the batch's other
// lines go on and it finishes.
TEST_F(BatchStoreTest, AResultTheDiskCannotTakeFailsItsLineAlone) {
  BatchStore batches(db_.get());
  BatchLines lines(db_.get());
  absl::StatusOr<StoredBatch> batch =
      batches.Create("alice", "f", "/v1/chat/completions", "24h", "null", Lines(2), kNow);
  absl::StatusOr<std::vector<ClaimedLine>> claimed = lines.Claim(2);
  ASSERT_EQ(claimed->size(), 2u);
  absl::StatusOr<SqliteStatement> pages = db_->Prepare("PRAGMA page_count");
  ASSERT_TRUE(*pages->Step());
  ASSERT_TRUE(db_->Exec(absl::StrCat("PRAGMA max_page_count = ", pages->Int(0) + 2)).ok());
  EXPECT_EQ(*lines.Keep((*claimed)[0], true, std::string(1 << 20, 'x')),
            BatchLines::Kept::kFailedUnstored);
  EXPECT_EQ(*lines.Keep((*claimed)[1], true, Result((*claimed)[1])), BatchLines::Kept::kRecorded);
  EXPECT_EQ(*lines.Keep((*claimed)[1], true, Result((*claimed)[1])), BatchLines::Kept::kAlready);
  ASSERT_TRUE(db_->Exec("PRAGMA max_page_count = 1000000").ok());
  absl::StatusOr<std::vector<StoredBatch>> finished = batches.Finish(kNow);
  ASSERT_EQ(finished->size(), 1u);
  EXPECT_EQ(finished->front().completed, 1);
  EXPECT_EQ(finished->front().failed, 1);
  FileStore files(db_.get());
  const std::string errors = *files.Content("alice", finished->front().error_file_id);
  EXPECT_EQ(CustomIds(errors), (std::vector<std::string>{"q1"}));
  EXPECT_NE(errors.find("result_not_stored"), std::string::npos);
  EXPECT_EQ(CustomIds(*files.Content("alice", finished->front().output_file_id)),
            (std::vector<std::string>{"q2"}));
}

TEST_F(BatchStoreTest, AFullDiskLeavesTheBatchToFinishLater) {
  BatchStore batches(db_.get());
  BatchLines lines(db_.get());
  absl::StatusOr<StoredBatch> batch =
      batches.Create("alice", "f", "/v1/chat/completions", "24h", "null", Lines(1), kNow);
  absl::StatusOr<std::vector<ClaimedLine>> claimed = lines.Claim(1);
  ASSERT_TRUE(*lines.Record(batch->id, 1, true, std::string(200000, 'x')));
  absl::StatusOr<SqliteStatement> pages = db_->Prepare("PRAGMA page_count");
  ASSERT_TRUE(*pages->Step());
  ASSERT_TRUE(db_->Exec(absl::StrCat("PRAGMA max_page_count = ", pages->Int(0))).ok());
  EXPECT_EQ(batches.Finish(kNow).status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(batches.Get("alice", batch->id)->status, "in_progress");
  ASSERT_TRUE(db_->Exec("PRAGMA max_page_count = 1000000").ok());
  EXPECT_EQ(batches.Finish(kNow)->size(), 1u);
}

}  // namespace
}  // namespace omnistage
