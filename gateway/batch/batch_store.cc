#include "gateway/batch/batch_store.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/random_id.h"
#include "gateway/batch/file_store.h"
#include "nlohmann/json.hpp"

namespace omnistage {
namespace {

constexpr char kColumns[] =
    "id, owner, endpoint, input_file_id, completion_window, status, metadata, created_at, "
    "in_progress_at, expires_at, finalizing_at, completed_at, expired_at, cancelling_at, "
    "cancelled_at, output_file_id, error_file_id, total, completed, failed";

StoredBatch Row(const SqliteStatement& row) {
  StoredBatch batch;
  batch.id = row.Text(0);
  batch.owner = row.Text(1);
  batch.endpoint = row.Text(2);
  batch.input_file_id = row.Text(3);
  batch.completion_window = row.Text(4);
  batch.status = row.Text(5);
  batch.metadata = row.Text(6);
  batch.created_at = row.Int(7);
  batch.in_progress_at = row.Int(8);
  batch.expires_at = row.Int(9);
  batch.finalizing_at = row.Int(10);
  batch.completed_at = row.Int(11);
  batch.expired_at = row.Int(12);
  batch.cancelling_at = row.Int(13);
  batch.cancelled_at = row.Int(14);
  batch.output_file_id = row.Text(15);
  batch.error_file_id = row.Text(16);
  batch.total = row.Int(17);
  batch.completed = row.Int(18);
  batch.failed = row.Int(19);
  return batch;
}

absl::Status NotFound(absl::string_view id) {
  return absl::NotFoundError(absl::StrCat("No such Batch object: ", id));
}

// Every row `select` gives.
absl::StatusOr<std::vector<StoredBatch>> Rows(SqliteStatement& select) {
  std::vector<StoredBatch> batches;
  for (;;) {
    absl::StatusOr<bool> row = select.Step();
    if (!row.ok()) return row.status();
    if (!*row) return batches;
    batches.push_back(Row(select));
  }
}

// A line that never ran, in the error file: OpenAI's shape for a request the
// batch did not get to.
std::string NotRunLine(const std::string& custom_id, const char* code, const char* message) {
  return nlohmann::json{{"id", absl::StrCat("batch_req_", RandomHex(12))},
                        {"custom_id", custom_id},
                        {"response", nullptr},
                        {"error", {{"code", code}, {"message", message}}}}
      .dump();
}

absl::Status Run(SqliteDatabase* db, absl::string_view sql, const std::string& id, int64_t value) {
  absl::StatusOr<SqliteStatement> update = db->Prepare(sql);
  if (!update.ok()) return update.status();
  update->Bind(1, value);
  update->Bind(2, id);
  return update->Run();
}

}  // namespace

absl::StatusOr<absl::Duration> ParseCompletionWindow(absl::string_view window) {
  absl::Duration duration;
  if (!absl::ParseDuration(window, &duration) || duration < absl::Seconds(1) ||
      duration > absl::Hours(24 * 7)) {
    return absl::InvalidArgumentError(
        absl::StrCat("Invalid 'completion_window': '", window,
                     "'. Expected a duration from 1s to 168h, such as \"24h\"."));
  }
  return duration;
}

absl::StatusOr<StoredBatch> BatchStore::Create(absl::string_view owner,
                                               absl::string_view input_file_id,
                                               absl::string_view endpoint, absl::string_view window,
                                               absl::string_view metadata,
                                               const std::vector<BatchInputLine>& lines,
                                               absl::Time now) {
  absl::StatusOr<absl::Duration> duration = ParseCompletionWindow(window);
  if (!duration.ok()) return duration.status();
  StoredBatch batch;
  batch.id = absl::StrCat("batch_", RandomHex(12));
  batch.owner = std::string(owner);
  batch.endpoint = std::string(endpoint);
  batch.input_file_id = std::string(input_file_id);
  batch.completion_window = std::string(window);
  batch.status = "in_progress";
  batch.metadata = std::string(metadata);
  batch.created_at = absl::ToUnixSeconds(now);
  batch.in_progress_at = batch.created_at;
  batch.expires_at = absl::ToUnixSeconds(now + *duration);
  batch.total = static_cast<int64_t>(lines.size());
  absl::Status status = db_->InTransaction([&]() -> absl::Status {
    absl::StatusOr<SqliteStatement> insert = db_->Prepare(
        "INSERT INTO batches (id, owner, endpoint, input_file_id, completion_window, status, "
        "metadata, created_at, in_progress_at, expires_at, total) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
    if (!insert.ok()) return insert.status();
    insert->Bind(1, batch.id);
    insert->Bind(2, batch.owner);
    insert->Bind(3, batch.endpoint);
    insert->Bind(4, batch.input_file_id);
    insert->Bind(5, batch.completion_window);
    insert->Bind(6, batch.status);
    insert->Bind(7, batch.metadata);
    insert->Bind(8, batch.created_at);
    insert->Bind(9, batch.in_progress_at);
    insert->Bind(10, batch.expires_at);
    insert->Bind(11, batch.total);
    if (absl::Status inserted = insert->Run(); !inserted.ok()) return inserted;
    absl::StatusOr<SqliteStatement> line = db_->Prepare(
        "INSERT INTO batch_lines (batch_id, line, custom_id, body, state) "
        "VALUES (?, ?, ?, ?, 'pending')");
    if (!line.ok()) return line.status();
    for (const BatchInputLine& input : lines) {
      line->Reset();
      line->Bind(1, batch.id);
      line->Bind(2, input.line);
      line->Bind(3, input.custom_id);
      line->Bind(4, input.body);
      if (absl::Status inserted = line->Run(); !inserted.ok()) return inserted;
    }
    return absl::OkStatus();
  });
  if (!status.ok()) return status;
  return batch;
}

absl::StatusOr<StoredBatch> BatchStore::Get(absl::string_view owner, absl::string_view id) {
  absl::StatusOr<SqliteStatement> select =
      db_->Prepare(absl::StrCat("SELECT ", kColumns, " FROM batches WHERE id = ? AND owner = ?"));
  if (!select.ok()) return select.status();
  select->Bind(1, id);
  select->Bind(2, owner);
  absl::StatusOr<std::vector<StoredBatch>> rows = Rows(*select);
  if (!rows.ok()) return rows.status();
  if (rows->empty()) return NotFound(id);
  return std::move(rows->front());
}

absl::StatusOr<std::vector<StoredBatch>> BatchStore::List(absl::string_view owner,
                                                          absl::string_view after, int limit) {
  absl::StatusOr<SqliteStatement> select = db_->Prepare(
      absl::StrCat("SELECT ", kColumns,
                   " FROM batches WHERE owner = ?1 AND (?2 = '' OR (created_at, rowid) < "
                   "(SELECT created_at, rowid FROM batches WHERE id = ?2 AND owner = ?1))"
                   " ORDER BY created_at DESC, rowid DESC LIMIT ?3"));
  if (!select.ok()) return select.status();
  select->Bind(1, owner);
  select->Bind(2, after);
  select->Bind(3, static_cast<int64_t>(limit));
  return Rows(*select);
}

absl::StatusOr<StoredBatch> BatchStore::Cancel(absl::string_view owner, absl::string_view id,
                                               absl::Time now) {
  absl::StatusOr<StoredBatch> batch = Get(owner, id);
  if (!batch.ok() || batch->status != "in_progress") return batch;
  absl::Status status = db_->InTransaction([&]() -> absl::Status {
    if (absl::Status s = Run(db_,
                             "UPDATE batches SET status = 'cancelling', cancelling_at = ? "
                             "WHERE id = ?",
                             batch->id, absl::ToUnixSeconds(now));
        !s.ok()) {
      return s;
    }
    absl::StatusOr<SqliteStatement> stop = db_->Prepare(
        "UPDATE batch_lines SET state = 'cancelled' WHERE batch_id = ? AND state = 'pending'");
    if (!stop.ok()) return stop.status();
    stop->Bind(1, batch->id);
    return stop->Run();
  });
  if (!status.ok()) return status;
  return Get(owner, id);
}

absl::StatusOr<std::vector<StoredBatch>> BatchStore::Unfinished(int limit) {
  absl::StatusOr<SqliteStatement> select = db_->Prepare(absl::StrCat(
      "SELECT ", kColumns,
      " FROM batches WHERE status IN ('in_progress', 'cancelling') ORDER BY created_at, rowid "
      "LIMIT ?"));
  if (!select.ok()) return select.status();
  select->Bind(1, static_cast<int64_t>(limit));
  return Rows(*select);
}

absl::StatusOr<std::vector<StoredBatch>> BatchStore::Finish(absl::Time now) {
  const int64_t seconds = absl::ToUnixSeconds(now);
  // Out of time: what has not run never will.
  absl::Status expired = db_->InTransaction([&]() -> absl::Status {
    absl::StatusOr<SqliteStatement> stop = db_->Prepare(
        "UPDATE batch_lines SET state = 'expired' WHERE state = 'pending' AND batch_id IN "
        "(SELECT id FROM batches WHERE status = 'in_progress' AND expires_at <= ?)");
    if (!stop.ok()) return stop.status();
    stop->Bind(1, seconds);
    return stop->Run();
  });
  if (!expired.ok()) return expired;
  // Batches with nothing left waiting or running.
  absl::StatusOr<SqliteStatement> select = db_->Prepare(absl::StrCat(
      "SELECT ", kColumns,
      " FROM batches b WHERE status IN ('in_progress', 'cancelling') AND NOT EXISTS "
      "(SELECT 1 FROM batch_lines l WHERE l.batch_id = b.id AND l.state IN ('pending', "
      "'running')) ORDER BY created_at"));
  if (!select.ok()) return select.status();
  absl::StatusOr<std::vector<StoredBatch>> done = Rows(*select);
  if (!done.ok()) return done.status();
  std::vector<StoredBatch> finished;
  for (const StoredBatch& batch : *done) {
    if (absl::Status status = FinishOne(batch, now); !status.ok()) return status;
    absl::StatusOr<StoredBatch> now_finished = Get(batch.owner, batch.id);
    if (!now_finished.ok()) return now_finished.status();
    finished.push_back(*std::move(now_finished));
  }
  return finished;
}

absl::Status BatchStore::FinishOne(const StoredBatch& batch, absl::Time now) {
  const int64_t seconds = absl::ToUnixSeconds(now);
  return db_->InTransaction([&]() -> absl::Status {
    absl::StatusOr<SqliteStatement> lines = db_->Prepare(
        "SELECT custom_id, state, result FROM batch_lines WHERE batch_id = ? ORDER BY line");
    if (!lines.ok()) return lines.status();
    lines->Bind(1, batch.id);
    std::string output;
    std::string errors;
    bool expired = false;
    for (;;) {
      absl::StatusOr<bool> row = lines->Step();
      if (!row.ok()) return row.status();
      if (!*row) break;
      const std::string state = lines->Text(1);
      if (state == "done") {
        absl::StrAppend(&output, lines->Text(2), "\n");
      } else if (state == "failed") {
        absl::StrAppend(&errors, lines->Text(2), "\n");
      } else if (state == "expired") {
        expired = true;
        absl::StrAppend(&errors,
                        NotRunLine(lines->Text(0), "batch_expired",
                                   "This request could not be run before the batch expired."),
                        "\n");
      } else if (state == "cancelled") {
        absl::StrAppend(&errors,
                        NotRunLine(lines->Text(0), "batch_cancelled",
                                   "This request was not run: the batch was cancelled."),
                        "\n");
      }
    }
    FileStore files(db_);
    std::string output_id;
    std::string error_id;
    if (!output.empty()) {
      absl::StatusOr<StoredFile> file = files.Create(
          batch.owner, "batch_output", absl::StrCat(batch.id, "_output.jsonl"), output);
      if (!file.ok()) return file.status();
      output_id = file->id;
    }
    if (!errors.empty()) {
      absl::StatusOr<StoredFile> file =
          files.Create(batch.owner, "batch_output", absl::StrCat(batch.id, "_error.jsonl"), errors);
      if (!file.ok()) return file.status();
      error_id = file->id;
    }
    const char* status = batch.status == "cancelling" ? "cancelled"
                         : expired                    ? "expired"
                                                      : "completed";
    absl::StatusOr<SqliteStatement> update = db_->Prepare(
        absl::StrCat("UPDATE batches SET status = ?1, finalizing_at = ?2, ", status,
                     "_at = ?2, output_file_id = NULLIF(?3, ''), error_file_id = NULLIF(?4, '') "
                     "WHERE id = ?5"));
    if (!update.ok()) return update.status();
    update->Bind(1, status);
    update->Bind(2, seconds);
    update->Bind(3, output_id);
    update->Bind(4, error_id);
    update->Bind(5, batch.id);
    return update->Run();
  });
}

}  // namespace omnistage
