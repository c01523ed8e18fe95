// SqliteDatabase: one connection to an SQLite database file, as the gateway's
// durable store of files and batches uses it (docs/openai.md, "Batches"):
// write-ahead logging (readers never wait for the writer, and a process
// killed mid-write loses nothing committed), a busy timeout instead of
// SQLITE_BUSY, foreign keys on. The schema is created or brought up to date
// at Open() from the versions given, each applied once in a transaction and
// recorded in PRAGMA user_version.
//
//   absl::StatusOr<std::unique_ptr<SqliteDatabase>> db = SqliteDatabase::Open(
//       "/var/lib/omnistage/batches.db", {"CREATE TABLE files (...)"});
//   SqliteStatement insert = *(*db)->Prepare("INSERT INTO files VALUES (?, ?)");
//
// Errors name the file and SQLite's message. Not thread-safe: one owner
// (the batch store's thread) uses it.
#ifndef OMNISTAGE_GATEWAY_BATCH_SQLITE_DATABASE_H_
#define OMNISTAGE_GATEWAY_BATCH_SQLITE_DATABASE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "gateway/batch/sqlite_statement.h"

struct sqlite3;

namespace omnistage {

class SqliteDatabase {
 public:
  // Opens (creating) `path` and applies the schema versions past the
  // file's: `schema[i]` is the SQL that brings version i to i + 1.
  static absl::StatusOr<std::unique_ptr<SqliteDatabase>> Open(
      const std::string& path, const std::vector<std::string>& schema);
  ~SqliteDatabase();
  SqliteDatabase(const SqliteDatabase&) = delete;
  SqliteDatabase& operator=(const SqliteDatabase&) = delete;

  // Runs `sql` (one statement or several, no results).
  absl::Status Exec(absl::string_view sql);
  absl::StatusOr<SqliteStatement> Prepare(absl::string_view sql);
  // BEGIN IMMEDIATE (the write lock at once), COMMIT, ROLLBACK.
  absl::Status Begin() { return Exec("BEGIN IMMEDIATE"); }
  absl::Status Commit() { return Exec("COMMIT"); }
  absl::Status Rollback() { return Exec("ROLLBACK"); }
  // Runs `body` in one transaction (BEGIN IMMEDIATE): committed when it
  // returns OK, rolled back (nothing of it kept) when it or the commit fails.
  absl::Status InTransaction(const std::function<absl::Status()>& body);
  // Rows the last INSERT, UPDATE or DELETE changed.
  int64_t changes() const;
  const std::string& path() const { return path_; }

 private:
  SqliteDatabase(std::string path, sqlite3* db) : path_(std::move(path)), db_(db) {}
  absl::Status Error(absl::string_view what) const;

  const std::string path_;
  sqlite3* const db_;
};

}  // namespace omnistage

#endif  // OMNISTAGE_GATEWAY_BATCH_SQLITE_DATABASE_H_
