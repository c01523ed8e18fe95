// SqliteStatement: one prepared SQLite statement (SqliteDatabase::Prepare):
// bind the parameters (1-based, as SQLite counts them), step through the
// rows, read the columns (0-based), reset to run it again.
//
//   SqliteStatement select = *db.Prepare("SELECT bytes FROM files WHERE id = ?");
//   select.Bind(1, "file-1");
//   absl::StatusOr<bool> row = select.Step();       // true: a row is there
//   if (row.ok() && *row) int64_t bytes = select.Int(0);
//
// Movable, not copyable; finalized when destroyed. Not thread-safe.
#ifndef OMNISTAGE_GATEWAY_BATCH_SQLITE_STATEMENT_H_
#define OMNISTAGE_GATEWAY_BATCH_SQLITE_STATEMENT_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

struct sqlite3;
struct sqlite3_stmt;

namespace omnistage {

class SqliteStatement {
 public:
  SqliteStatement(sqlite3* db, sqlite3_stmt* statement) : db_(db), statement_(statement) {}
  ~SqliteStatement();
  SqliteStatement(SqliteStatement&& other) noexcept;
  SqliteStatement& operator=(SqliteStatement&& other) noexcept;
  SqliteStatement(const SqliteStatement&) = delete;
  SqliteStatement& operator=(const SqliteStatement&) = delete;

  // Text and blobs are copied into the statement.
  void Bind(int index, absl::string_view text);
  void BindBlob(int index, absl::string_view bytes);
  void Bind(int index, int64_t value);
  void BindNull(int index);
  // The next row: true when there is one, false when the statement is done.
  absl::StatusOr<bool> Step();
  // Step() for a statement that returns no rows.
  absl::Status Run();
  // Ready to run again; the bindings are cleared.
  void Reset();

  // Columns of the current row; NULL reads as "" or 0.
  std::string Text(int column) const;
  int64_t Int(int column) const;
  bool IsNull(int column) const;

 private:
  sqlite3* db_ = nullptr;
  sqlite3_stmt* statement_ = nullptr;
};

}  // namespace omnistage

#endif  // OMNISTAGE_GATEWAY_BATCH_SQLITE_STATEMENT_H_
