#include "gateway/batch/batch_schema.h"

namespace omnistage {

const std::vector<std::string>& BatchSchema() {
  static const std::vector<std::string>* const schema = new std::vector<std::string>{
      // Version 1: files, with their content (a file is written once and
      // read whole: a blob in the same transaction as its row).
      "CREATE TABLE files ("
      "  id TEXT PRIMARY KEY,"
      "  owner TEXT NOT NULL,"
      "  purpose TEXT NOT NULL,"
      "  filename TEXT NOT NULL,"
      "  bytes INTEGER NOT NULL,"
      "  created_at INTEGER NOT NULL,"
      "  content BLOB NOT NULL"
      ");"
      "CREATE INDEX files_by_owner ON files (owner, created_at);",
      // Version 2: batches, and each input line's state and result (a line's
      // result and state change in one transaction: it is recorded once).
      "CREATE TABLE batches ("
      "  id TEXT PRIMARY KEY,"
      "  owner TEXT NOT NULL,"
      "  endpoint TEXT NOT NULL,"
      "  input_file_id TEXT NOT NULL,"
      "  completion_window TEXT NOT NULL,"
      "  status TEXT NOT NULL,"
      "  metadata TEXT NOT NULL,"
      "  created_at INTEGER NOT NULL,"
      "  in_progress_at INTEGER,"
      "  expires_at INTEGER NOT NULL,"
      "  finalizing_at INTEGER,"
      "  completed_at INTEGER,"
      "  expired_at INTEGER,"
      "  cancelling_at INTEGER,"
      "  cancelled_at INTEGER,"
      "  output_file_id TEXT,"
      "  error_file_id TEXT,"
      "  total INTEGER NOT NULL,"
      "  completed INTEGER NOT NULL DEFAULT 0,"
      "  failed INTEGER NOT NULL DEFAULT 0"
      ");"
      "CREATE INDEX batches_by_owner ON batches (owner, created_at);"
      "CREATE INDEX batches_by_status ON batches (status, created_at);"
      "CREATE TABLE batch_lines ("
      "  batch_id TEXT NOT NULL REFERENCES batches (id) ON DELETE CASCADE,"
      "  line INTEGER NOT NULL,"
      "  custom_id TEXT NOT NULL,"
      "  body TEXT NOT NULL,"
      "  state TEXT NOT NULL,"
      "  attempts INTEGER NOT NULL DEFAULT 0,"
      "  result TEXT,"
      "  PRIMARY KEY (batch_id, line)"
      ") WITHOUT ROWID;"
      "CREATE INDEX batch_lines_by_state ON batch_lines (state, batch_id, line);",
  };
  return *schema;
}

}  // namespace omnistage
