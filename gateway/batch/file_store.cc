#include "gateway/batch/file_store.h"

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/random_id.h"

namespace omnistage {
namespace {

constexpr char kColumns[] = "id, owner, purpose, filename, bytes, created_at";

StoredFile Row(const SqliteStatement& row) {
  StoredFile file;
  file.id = row.Text(0);
  file.owner = row.Text(1);
  file.purpose = row.Text(2);
  file.filename = row.Text(3);
  file.bytes = row.Int(4);
  file.created_at = row.Int(5);
  return file;
}

absl::Status NotFound(absl::string_view id) {
  return absl::NotFoundError(absl::StrCat("No such File object: ", id));
}

}  // namespace

absl::StatusOr<StoredFile> FileStore::Create(absl::string_view owner, absl::string_view purpose,
                                             absl::string_view filename,
                                             absl::string_view content) {
  StoredFile file;
  file.id = absl::StrCat("file-", RandomHex(12));
  file.owner = std::string(owner);
  file.purpose = std::string(purpose);
  file.filename = std::string(filename);
  file.bytes = static_cast<int64_t>(content.size());
  file.created_at = absl::ToUnixSeconds(absl::Now());
  absl::StatusOr<SqliteStatement> insert = db_->Prepare(
      absl::StrCat("INSERT INTO files (", kColumns, ", content) VALUES (?, ?, ?, ?, ?, ?, ?)"));
  if (!insert.ok()) return insert.status();
  insert->Bind(1, file.id);
  insert->Bind(2, file.owner);
  insert->Bind(3, file.purpose);
  insert->Bind(4, file.filename);
  insert->Bind(5, file.bytes);
  insert->Bind(6, file.created_at);
  insert->BindBlob(7, content);
  if (absl::Status status = insert->Run(); !status.ok()) return status;
  return file;
}

absl::StatusOr<StoredFile> FileStore::Get(absl::string_view owner, absl::string_view id) {
  absl::StatusOr<SqliteStatement> select =
      db_->Prepare(absl::StrCat("SELECT ", kColumns, " FROM files WHERE id = ? AND owner = ?"));
  if (!select.ok()) return select.status();
  select->Bind(1, id);
  select->Bind(2, owner);
  absl::StatusOr<bool> row = select->Step();
  if (!row.ok()) return row.status();
  if (!*row) return NotFound(id);
  return Row(*select);
}

absl::StatusOr<std::string> FileStore::Content(absl::string_view owner, absl::string_view id) {
  absl::StatusOr<SqliteStatement> select =
      db_->Prepare("SELECT content FROM files WHERE id = ? AND owner = ?");
  if (!select.ok()) return select.status();
  select->Bind(1, id);
  select->Bind(2, owner);
  absl::StatusOr<bool> row = select->Step();
  if (!row.ok()) return row.status();
  if (!*row) return NotFound(id);
  return select->Text(0);
}

absl::Status FileStore::Delete(absl::string_view owner, absl::string_view id) {
  absl::StatusOr<SqliteStatement> remove =
      db_->Prepare("DELETE FROM files WHERE id = ? AND owner = ?");
  if (!remove.ok()) return remove.status();
  remove->Bind(1, id);
  remove->Bind(2, owner);
  if (absl::Status status = remove->Run(); !status.ok()) return status;
  if (db_->changes() == 0) return NotFound(id);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<StoredFile>> FileStore::List(absl::string_view owner,
                                                        absl::string_view purpose,
                                                        absl::string_view after, int limit) {
  // A page goes on below its last file in (created_at, rowid) order; an
  // `after` the owner does not have ends the list.
  absl::StatusOr<SqliteStatement> select = db_->Prepare(absl::StrCat(
      "SELECT ", kColumns,
      " FROM files WHERE owner = ?1 AND (?2 = '' OR purpose = ?2) AND (?3 = '' OR "
      "(created_at, rowid) < (SELECT created_at, rowid FROM files WHERE id = ?3 AND owner = ?1))"
      " ORDER BY created_at DESC, rowid DESC LIMIT ?4"));
  if (!select.ok()) return select.status();
  select->Bind(1, owner);
  select->Bind(2, purpose);
  select->Bind(3, after);
  select->Bind(4, static_cast<int64_t>(limit));
  std::vector<StoredFile> files;
  for (;;) {
    absl::StatusOr<bool> row = select->Step();
    if (!row.ok()) return row.status();
    if (!*row) break;
    files.push_back(Row(*select));
  }
  return files;
}

}  // namespace omnistage
