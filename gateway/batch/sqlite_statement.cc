#include "gateway/batch/sqlite_statement.h"

#include <sqlite3.h>

#include <utility>

#include "absl/strings/str_cat.h"

namespace omnistage {

SqliteStatement::~SqliteStatement() { sqlite3_finalize(statement_); }

SqliteStatement::SqliteStatement(SqliteStatement&& other) noexcept
    : db_(other.db_), statement_(std::exchange(other.statement_, nullptr)) {}

SqliteStatement& SqliteStatement::operator=(SqliteStatement&& other) noexcept {
  if (this != &other) {
    sqlite3_finalize(statement_);
    db_ = other.db_;
    statement_ = std::exchange(other.statement_, nullptr);
  }
  return *this;
}

void SqliteStatement::Bind(int index, absl::string_view text) {
  sqlite3_bind_text64(statement_, index, text.data(), text.size(), SQLITE_TRANSIENT, SQLITE_UTF8);
}

void SqliteStatement::BindBlob(int index, absl::string_view bytes) {
  sqlite3_bind_blob64(statement_, index, bytes.data(), bytes.size(), SQLITE_TRANSIENT);
}

void SqliteStatement::Bind(int index, int64_t value) {
  sqlite3_bind_int64(statement_, index, value);
}

void SqliteStatement::BindNull(int index) { sqlite3_bind_null(statement_, index); }

absl::StatusOr<bool> SqliteStatement::Step() {
  const int rc = sqlite3_step(statement_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  // SQLITE_FULL (the disk), SQLITE_IOERR, SQLITE_CORRUPT: the store cannot
  // take it now; a constraint: the caller's mistake.
  const std::string message = absl::StrCat(sqlite3_errmsg(db_), " (", sqlite3_errstr(rc), ")");
  if ((rc & 0xff) == SQLITE_CONSTRAINT) return absl::AlreadyExistsError(message);
  if ((rc & 0xff) == SQLITE_FULL) return absl::ResourceExhaustedError(message);
  return absl::UnavailableError(message);
}

absl::Status SqliteStatement::Run() {
  absl::StatusOr<bool> row = Step();
  if (!row.ok()) return row.status();
  return absl::OkStatus();
}

void SqliteStatement::Reset() {
  sqlite3_reset(statement_);
  sqlite3_clear_bindings(statement_);
}

std::string SqliteStatement::Text(int column) const {
  const void* bytes = sqlite3_column_blob(statement_, column);
  const int size = sqlite3_column_bytes(statement_, column);
  if (bytes == nullptr || size <= 0) return "";
  return std::string(static_cast<const char*>(bytes), static_cast<size_t>(size));
}

int64_t SqliteStatement::Int(int column) const { return sqlite3_column_int64(statement_, column); }

bool SqliteStatement::IsNull(int column) const {
  return sqlite3_column_type(statement_, column) == SQLITE_NULL;
}

}  // namespace omnistage
