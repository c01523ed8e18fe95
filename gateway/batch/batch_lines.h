// BatchLines: the lines of the batches in progress (batch_store.h), as the
// gateway's batch runner takes them: claimed (marked running) a few at a
// time, spread over the batches; each one's result recorded once, with its
// batch's counts, in one transaction; or put back to wait (a refusal worth
// retrying). A line running when the process stopped was never recorded:
// Requeue() at start puts it back, so it runs again and is recorded once.
//
//   BatchLines lines(db.get());
//   lines.Requeue();                                   // once, at start
//   for (const ClaimedLine& line : *lines.Claim(8)) ...
//   lines.Record(line.batch_id, line.line, /*ok=*/true, result_json);
//
// Not thread-safe: its database's owner uses it.
#ifndef OMNISTAGE_GATEWAY_BATCH_BATCH_LINES_H_
#define OMNISTAGE_GATEWAY_BATCH_BATCH_LINES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "gateway/batch/sqlite_database.h"

namespace omnistage {

struct ClaimedLine {
  std::string batch_id;
  int64_t line = 0;
  std::string custom_id;
  std::string body;
  // The batch's.
  std::string owner;
  std::string endpoint;
  // Times it was claimed before and put back.
  int64_t attempts = 0;
};

class BatchLines {
 public:
  // `db` (not owned) has BatchSchema().
  explicit BatchLines(SqliteDatabase* db) : db_(db) {}

  // Lines left running (by a process that stopped) wait again; how many.
  absl::StatusOr<int64_t> Requeue();
  // Up to `limit` waiting lines of batches in progress, now running: taken
  // from each batch in turn (oldest first), in each in input order.
  absl::StatusOr<std::vector<ClaimedLine>> Claim(int limit);
  // A running line's result (`result`: its line of the output file when
  // `ok`, else of the error file), with its batch's count. False, and
  // nothing written, when the line was not running (recorded already).
  absl::StatusOr<bool> Record(absl::string_view batch_id, int64_t line, bool ok,
                              absl::string_view result);
  // Record() when the store takes `result`; when it cannot (a full disk),
  // the line fails with that error instead (result_not_stored, in the error
  // file: a short line the store may still take); failing that too, it waits
  // to run again (Retry). An error only when not even that was kept: the
  // line stays running until the next start (Requeue).
  enum class Kept { kRecorded, kAlready, kFailedUnstored, kWaitsAgain };
  absl::StatusOr<Kept> Keep(const ClaimedLine& line, bool ok, absl::string_view result);
  // A running line waits again, to be claimed later (unless its batch was
  // cancelled meanwhile: then it never runs).
  absl::Status Retry(absl::string_view batch_id, int64_t line);
  // Lines running now.
  absl::StatusOr<int64_t> Running();

 private:
  SqliteDatabase* const db_;
};

}  // namespace omnistage

#endif  // OMNISTAGE_GATEWAY_BATCH_BATCH_LINES_H_
