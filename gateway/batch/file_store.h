// FileStore: the files of the OpenAI Files API (docs/openai.md, "Files"),
// kept in the gateway's SQLite store (sqlite_database.h, batch_schema.h):
// each belongs to the identity that uploaded it, and another identity is
// told it does not exist (NOT_FOUND), as OpenAI answers for an id it never
// issued.
//
//   FileStore files(db.get());
//   absl::StatusOr<StoredFile> file = files.Create("alice", "batch", "in.jsonl", bytes);
//   absl::StatusOr<std::string> content = files.Content("alice", file->id);
//
// Not thread-safe: its database's owner uses it.
#ifndef OMNISTAGE_GATEWAY_BATCH_FILE_STORE_H_
#define OMNISTAGE_GATEWAY_BATCH_FILE_STORE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "gateway/batch/sqlite_database.h"

namespace omnistage {

struct StoredFile {
  std::string id;  // "file-" and 24 hex digits
  std::string owner;
  std::string purpose;
  std::string filename;
  int64_t bytes = 0;
  int64_t created_at = 0;  // Unix seconds
};

class FileStore {
 public:
  // `db` (not owned) has BatchSchema().
  explicit FileStore(SqliteDatabase* db) : db_(db) {}

  // Stores `content` as a new file of `owner`'s.
  absl::StatusOr<StoredFile> Create(absl::string_view owner, absl::string_view purpose,
                                    absl::string_view filename, absl::string_view content);
  // NOT_FOUND unless `owner` has file `id`.
  absl::StatusOr<StoredFile> Get(absl::string_view owner, absl::string_view id);
  absl::StatusOr<std::string> Content(absl::string_view owner, absl::string_view id);
  absl::Status Delete(absl::string_view owner, absl::string_view id);
  // `owner`'s files, newest first, at most `limit`: only `purpose`'s unless
  // it is empty, and only those after file `after` (a page's last id) unless
  // it is empty.
  absl::StatusOr<std::vector<StoredFile>> List(absl::string_view owner, absl::string_view purpose,
                                               absl::string_view after, int limit);

 private:
  SqliteDatabase* const db_;
};

}  // namespace omnistage

#endif  // OMNISTAGE_GATEWAY_BATCH_FILE_STORE_H_
