#include "gateway/batch/file_store.h"

#include <memory>
#include <string>

#include "gateway/batch/batch_schema.h"
#include "gateway/batch/test_store.h"
#include "gtest/gtest.h"

namespace omnistage {
namespace {

TEST(FileStoreTest, AFileIsItsOwnersAlone) {
  std::unique_ptr<SqliteDatabase> db = OpenTestStore("owners.db");
  ASSERT_NE(db, nullptr);
  FileStore files(db.get());
  const std::string content = std::string("{\"custom_id\": \"a\"}\n") + std::string(1, '\0') + "x";
  absl::StatusOr<StoredFile> file = files.Create("alice", "batch", "in.jsonl", content);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->id.rfind("file-", 0), 0u);
  EXPECT_EQ(file->id.size(), 5u + 24u);
  EXPECT_EQ(file->bytes, static_cast<int64_t>(content.size()));

  EXPECT_EQ(files.Get("alice", file->id)->filename, "in.jsonl");
  EXPECT_EQ(*files.Content("alice", file->id), content);
  EXPECT_EQ(files.Get("bob", file->id).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(files.Content("bob", file->id).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(files.Delete("bob", file->id).code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(files.List("bob", "", "", 100)->empty());

  ASSERT_TRUE(files.Delete("alice", file->id).ok());
  EXPECT_EQ(files.Get("alice", file->id).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(files.Delete("alice", file->id).code(), absl::StatusCode::kNotFound);
}

TEST(FileStoreTest, ListsNewestFirstByPurpose) {
  std::unique_ptr<SqliteDatabase> db = OpenTestStore("list.db");
  ASSERT_NE(db, nullptr);
  FileStore files(db.get());
  ASSERT_TRUE(files.Create("alice", "batch", "1.jsonl", "1").ok());
  ASSERT_TRUE(files.Create("alice", "batch_output", "2.jsonl", "2").ok());
  ASSERT_TRUE(files.Create("alice", "batch", "3.jsonl", "3").ok());
  absl::StatusOr<std::vector<StoredFile>> all = files.List("alice", "", "", 100);
  ASSERT_EQ(all->size(), 3u);
  EXPECT_EQ((*all)[0].filename, "3.jsonl");
  EXPECT_EQ((*all)[2].filename, "1.jsonl");
  absl::StatusOr<std::vector<StoredFile>> batch = files.List("alice", "batch", "", 100);
  ASSERT_EQ(batch->size(), 2u);
  EXPECT_EQ(files.List("alice", "", "", 1)->size(), 1u);
  // Pages: after the newest, the two older ones; after the oldest, none;
  // after a file of another owner's, none.
  absl::StatusOr<std::vector<StoredFile>> rest = files.List("alice", "", (*all)[0].id, 100);
  ASSERT_EQ(rest->size(), 2u);
  EXPECT_EQ((*rest)[0].filename, "2.jsonl");
  EXPECT_EQ((*rest)[1].filename, "1.jsonl");
  EXPECT_TRUE(files.List("alice", "", (*all)[2].id, 100)->empty());
  absl::StatusOr<StoredFile> bobs = files.Create("bob", "batch", "b.jsonl", "b");
  ASSERT_TRUE(bobs.ok());
  EXPECT_TRUE(files.List("alice", "", bobs->id, 100)->empty());
}

// A disk that fills (here: a database held to a few pages) refuses the file
// as RESOURCE_EXHAUSTED, keeps nothing of it, and takes the next one that
// fits.
TEST(FileStoreTest, AFullDiskRefusesTheFileAndKeepsNothing) {
  std::unique_ptr<SqliteDatabase> db = OpenTestStore("full.db");
  ASSERT_NE(db, nullptr);
  ASSERT_TRUE(db->Exec("PRAGMA max_page_count = 16").ok());
  FileStore files(db.get());
  absl::StatusOr<StoredFile> big = files.Create("alice", "batch", "big", std::string(1 << 20, 'x'));
  ASSERT_EQ(big.status().code(), absl::StatusCode::kResourceExhausted) << big.status();
  EXPECT_TRUE(files.List("alice", "", "", 10)->empty());
  EXPECT_TRUE(files.Create("alice", "batch", "small", "x").ok());
}

// What was stored is there after the store is closed and opened again (a
// gateway restarted), and opening applies no schema twice.
TEST(FileStoreTest, FilesOutliveTheProcessThatStoredThem) {
  const std::string path = "reopen.db";
  std::string id;
  {
    std::unique_ptr<SqliteDatabase> db = OpenTestStore(path);
    ASSERT_NE(db, nullptr);
    absl::StatusOr<StoredFile> file = FileStore(db.get()).Create("alice", "batch", "a", "bytes");
    ASSERT_TRUE(file.ok());
    id = file->id;
  }
  std::unique_ptr<SqliteDatabase> db = OpenTestStore(path);
  ASSERT_NE(db, nullptr);
  EXPECT_EQ(*FileStore(db.get()).Content("alice", id), "bytes");
}

TEST(SqliteDatabaseTest, RefusesAStoreWrittenByALaterRelease) {
  const std::string path = TestStorePath("later.db");
  ASSERT_TRUE(SqliteDatabase::Open(path, {"CREATE TABLE a (x)", "CREATE TABLE b (x)"}).ok());
  absl::StatusOr<std::unique_ptr<SqliteDatabase>> older =
      SqliteDatabase::Open(path, {"CREATE TABLE a (x)"});
  EXPECT_EQ(older.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(older.status().message().find("newer"), std::string::npos) << older.status();
}

TEST(SqliteDatabaseTest, ABadSchemaNamesItsVersionAndLeavesNothingHalfDone) {
  const std::string path = TestStorePath("bad.db");
  absl::StatusOr<std::unique_ptr<SqliteDatabase>> db =
      SqliteDatabase::Open(path, {"CREATE TABLE a (x)", "CREATE TABLE b (x); NOT SQL"});
  ASSERT_FALSE(db.ok());
  EXPECT_NE(db.status().message().find("schema version 2"), std::string::npos) << db.status();
  // Version 1 stayed; version 2 left no table b behind.
  db = SqliteDatabase::Open(path, {"CREATE TABLE a (x)", "CREATE TABLE b (x)"});
  ASSERT_TRUE(db.ok()) << db.status();
}

TEST(SqliteDatabaseTest, AFileThatCannotBeOpenedSaysWhich) {
  absl::StatusOr<std::unique_ptr<SqliteDatabase>> db =
      SqliteDatabase::Open("/nonexistent-dir/x.db", BatchSchema());
  ASSERT_FALSE(db.ok());
  EXPECT_NE(db.status().message().find("/nonexistent-dir/x.db"), std::string::npos);
}

}  // namespace
}  // namespace omnistage
