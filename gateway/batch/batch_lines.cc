#include "gateway/batch/batch_lines.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/random_id.h"
#include "nlohmann/json.hpp"

namespace omnistage {

absl::StatusOr<int64_t> BatchLines::Requeue() {
  absl::Status status =
      db_->Exec("UPDATE batch_lines SET state = 'pending' WHERE state = 'running'");
  if (!status.ok()) return status;
  return db_->changes();
}

absl::StatusOr<std::vector<ClaimedLine>> BatchLines::Claim(int limit) {
  std::vector<ClaimedLine> claimed;
  if (limit <= 0) return claimed;
  absl::Status status = db_->InTransaction([&]() -> absl::Status {
    // The batches with lines waiting, oldest first; then a share of the
    // limit from each (the first ones get the remainder).
    absl::StatusOr<SqliteStatement> batches = db_->Prepare(
        "SELECT b.id, b.owner, b.endpoint FROM batches b WHERE b.status = 'in_progress' AND "
        "EXISTS (SELECT 1 FROM batch_lines l WHERE l.state = 'pending' AND l.batch_id = b.id) "
        "ORDER BY b.created_at, b.rowid LIMIT ?");
    if (!batches.ok()) return batches.status();
    batches->Bind(1, static_cast<int64_t>(limit));
    struct Batch {
      std::string id, owner, endpoint;
    };
    std::vector<Batch> waiting;
    for (;;) {
      absl::StatusOr<bool> row = batches->Step();
      if (!row.ok()) return row.status();
      if (!*row) break;
      waiting.push_back({batches->Text(0), batches->Text(1), batches->Text(2)});
    }
    absl::StatusOr<SqliteStatement> lines = db_->Prepare(
        "SELECT line, custom_id, body, attempts FROM batch_lines "
        "WHERE state = 'pending' AND batch_id = ? ORDER BY line LIMIT ?");
    if (!lines.ok()) return lines.status();
    absl::StatusOr<SqliteStatement> mark =
        db_->Prepare("UPDATE batch_lines SET state = 'running' WHERE batch_id = ? AND line = ?");
    if (!mark.ok()) return mark.status();
    int left = limit;
    for (size_t i = 0; i < waiting.size() && left > 0; ++i) {
      const int remaining_batches = static_cast<int>(waiting.size() - i);
      const int share = (left + remaining_batches - 1) / remaining_batches;
      lines->Reset();
      lines->Bind(1, waiting[i].id);
      lines->Bind(2, static_cast<int64_t>(share));
      for (;;) {
        absl::StatusOr<bool> row = lines->Step();
        if (!row.ok()) return row.status();
        if (!*row) break;
        ClaimedLine line;
        line.batch_id = waiting[i].id;
        line.line = lines->Int(0);
        line.custom_id = lines->Text(1);
        line.body = lines->Text(2);
        line.attempts = lines->Int(3);
        line.owner = waiting[i].owner;
        line.endpoint = waiting[i].endpoint;
        claimed.push_back(std::move(line));
        --left;
      }
    }
    for (const ClaimedLine& line : claimed) {
      mark->Reset();
      mark->Bind(1, line.batch_id);
      mark->Bind(2, line.line);
      if (absl::Status marked = mark->Run(); !marked.ok()) return marked;
    }
    return absl::OkStatus();
  });
  if (!status.ok()) return status;
  return claimed;
}

absl::StatusOr<bool> BatchLines::Record(absl::string_view batch_id, int64_t line, bool ok,
                                        absl::string_view result) {
  bool recorded = false;
  absl::Status status = db_->InTransaction([&]() -> absl::Status {
    absl::StatusOr<SqliteStatement> update = db_->Prepare(
        "UPDATE batch_lines SET state = ?, result = ? "
        "WHERE batch_id = ? AND line = ? AND state = 'running'");
    if (!update.ok()) return update.status();
    update->Bind(1, ok ? "done" : "failed");
    update->Bind(2, result);
    update->Bind(3, batch_id);
    update->Bind(4, line);
    if (absl::Status s = update->Run(); !s.ok()) return s;
    if (db_->changes() == 0) return absl::OkStatus();
    recorded = true;
    absl::StatusOr<SqliteStatement> count =
        db_->Prepare(ok ? "UPDATE batches SET completed = completed + 1 WHERE id = ?"
                        : "UPDATE batches SET failed = failed + 1 WHERE id = ?");
    if (!count.ok()) return count.status();
    count->Bind(1, batch_id);
    return count->Run();
  });
  if (!status.ok()) return status;
  return recorded;
}

absl::StatusOr<BatchLines::Kept> BatchLines::Keep(const ClaimedLine& line, bool ok,
                                                  absl::string_view result) {
  absl::StatusOr<bool> recorded = Record(line.batch_id, line.line, ok, result);
  if (recorded.ok()) return *recorded ? Kept::kRecorded : Kept::kAlready;
  const std::string unstored =
      nlohmann::json{{"id", absl::StrCat("batch_req_", RandomHex(12))},
                     {"custom_id", line.custom_id},
                     {"response", nullptr},
                     {"error",
                      {{"code", "result_not_stored"},
                       {"message", absl::StrCat("The result could not be stored: ",
                                                recorded.status().message())}}}}
          .dump();
  if (absl::StatusOr<bool> failed = Record(line.batch_id, line.line, /*ok=*/false, unstored);
      failed.ok()) {
    return *failed ? Kept::kFailedUnstored : Kept::kAlready;
  }
  if (Retry(line.batch_id, line.line).ok()) return Kept::kWaitsAgain;
  return recorded.status();
}

absl::Status BatchLines::Retry(absl::string_view batch_id, int64_t line) {
  // A line of a batch cancelled meanwhile never runs again.
  absl::StatusOr<SqliteStatement> update = db_->Prepare(
      "UPDATE batch_lines SET attempts = attempts + 1, state = CASE WHEN (SELECT status FROM "
      "batches WHERE id = ?1) = 'cancelling' THEN 'cancelled' ELSE 'pending' END "
      "WHERE batch_id = ?1 AND line = ?2 AND state = 'running'");
  if (!update.ok()) return update.status();
  update->Bind(1, batch_id);
  update->Bind(2, line);
  return update->Run();
}

absl::StatusOr<int64_t> BatchLines::Running() {
  absl::StatusOr<SqliteStatement> count =
      db_->Prepare("SELECT COUNT(*) FROM batch_lines WHERE state = 'running'");
  if (!count.ok()) return count.status();
  absl::StatusOr<bool> row = count->Step();
  if (!row.ok()) return row.status();
  return *row ? count->Int(0) : 0;
}

}  // namespace omnistage
