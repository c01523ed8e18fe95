#include "gateway/batch/sqlite_database.h"

#include <sqlite3.h>

#include <utility>

#include "absl/strings/str_cat.h"

namespace omnistage {
namespace {

// How long a statement waits for another connection's write lock.
constexpr int kBusyTimeoutMs = 5000;

}  // namespace

absl::StatusOr<std::unique_ptr<SqliteDatabase>> SqliteDatabase::Open(
    const std::string& path, const std::vector<std::string>& schema) {
  sqlite3* db = nullptr;
  const int rc = sqlite3_open_v2(
      path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    const std::string message = db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    sqlite3_close(db);
    return absl::FailedPreconditionError(absl::StrCat(path, ": cannot open: ", message));
  }
  std::unique_ptr<SqliteDatabase> database(new SqliteDatabase(path, db));
  sqlite3_busy_timeout(db, kBusyTimeoutMs);
  // WAL: a commit is one append to the log, and a process killed at any
  // point leaves every committed transaction there. NORMAL syncs at each
  // checkpoint: a power cut may lose the last commits, a crash none.
  for (const char* pragma :
       {"PRAGMA journal_mode=WAL", "PRAGMA synchronous=NORMAL", "PRAGMA foreign_keys=ON"}) {
    if (absl::Status status = database->Exec(pragma); !status.ok()) return status;
  }
  absl::StatusOr<SqliteStatement> version = database->Prepare("PRAGMA user_version");
  if (!version.ok()) return version.status();
  absl::StatusOr<bool> row = version->Step();
  if (!row.ok()) return row.status();
  const int64_t have = *row ? version->Int(0) : 0;
  if (have > static_cast<int64_t>(schema.size())) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, ": schema version ", have, " is newer than this binary's (",
                     schema.size(), "): written by a later release"));
  }
  for (size_t v = static_cast<size_t>(have); v < schema.size(); ++v) {
    absl::Status status = database->Begin();
    if (status.ok()) status = database->Exec(schema[v]);
    if (status.ok()) status = database->Exec(absl::StrCat("PRAGMA user_version=", v + 1));
    if (status.ok()) status = database->Commit();
    if (!status.ok()) {
      database->Rollback().IgnoreError();
      return absl::FailedPreconditionError(
          absl::StrCat(path, ": schema version ", v + 1, ": ", status.message()));
    }
  }
  return database;
}

SqliteDatabase::~SqliteDatabase() { sqlite3_close_v2(db_); }

absl::Status SqliteDatabase::InTransaction(const std::function<absl::Status()>& body) {
  absl::Status status = Begin();
  if (!status.ok()) return status;
  status = body();
  if (status.ok()) status = Commit();
  if (!status.ok()) Rollback().IgnoreError();
  return status;
}

absl::Status SqliteDatabase::Error(absl::string_view what) const {
  const std::string message = absl::StrCat(path_, ": ", what, ": ", sqlite3_errmsg(db_));
  if ((sqlite3_extended_errcode(db_) & 0xff) == SQLITE_FULL) {
    return absl::ResourceExhaustedError(message);
  }
  return absl::UnavailableError(message);
}

absl::Status SqliteDatabase::Exec(absl::string_view sql) {
  const std::string text(sql);
  if (sqlite3_exec(db_, text.c_str(), nullptr, nullptr, nullptr) != SQLITE_OK) {
    return Error(text.substr(0, 60));
  }
  return absl::OkStatus();
}

absl::StatusOr<SqliteStatement> SqliteDatabase::Prepare(absl::string_view sql) {
  sqlite3_stmt* statement = nullptr;
  if (sqlite3_prepare_v2(db_, sql.data(), static_cast<int>(sql.size()), &statement, nullptr) !=
      SQLITE_OK) {
    return Error(absl::StrCat("cannot prepare ", sql.substr(0, 60)));
  }
  return SqliteStatement(db_, statement);
}

int64_t SqliteDatabase::changes() const { return sqlite3_changes64(db_); }

}  // namespace omnistage
