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
  };
  return *schema;
}

}  // namespace omnistage
