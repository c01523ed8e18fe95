// BatchStore: the Batch API's batches (docs/openai.md, "Batches") in the
// gateway's SQLite store (batch_schema.h): each belongs to the identity that
// created it (another is told it does not exist), holds a copy of its input
// file's lines (batch_lines.h runs them), and moves through OpenAI's
// statuses:
//
//   in_progress --(every line ran)--> completed
//        |  \----(its window ran out; lines not run: batch_expired)--> expired
//        \--(Cancel: lines not run: batch_cancelled)--> cancelling --> cancelled
//
// (A batch is checked whole when it is created, so none is ever validating
// or failed.) Finish() writes a finished batch's output file (the lines that
// ran, in input order) and error file (those that failed or never ran) and
// its final status in one transaction: each line is in exactly one of them,
// once.
//
//   BatchStore batches(db.get());
//   absl::StatusOr<StoredBatch> batch = batches.Create(
//       "alice", file_id, "/v1/chat/completions", "24h", "{}", lines, now);
//   batches.Finish(now);  // the runner, now and then
//
// Not thread-safe: its database's owner uses it.
#ifndef OMNISTAGE_GATEWAY_BATCH_BATCH_STORE_H_
#define OMNISTAGE_GATEWAY_BATCH_BATCH_STORE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "gateway/batch/batch_input.h"
#include "gateway/batch/sqlite_database.h"

namespace omnistage {

struct StoredBatch {
  std::string id;  // "batch_" and 24 hex digits
  std::string owner;
  std::string endpoint;
  std::string input_file_id;
  std::string completion_window;
  std::string status;
  std::string metadata;  // a JSON object, or "null"
  // Unix seconds; 0: not (yet) reached.
  int64_t created_at = 0;
  int64_t in_progress_at = 0;
  int64_t expires_at = 0;
  int64_t finalizing_at = 0;
  int64_t completed_at = 0;
  int64_t expired_at = 0;
  int64_t cancelling_at = 0;
  int64_t cancelled_at = 0;
  // "" until written (and when no line went there).
  std::string output_file_id;
  std::string error_file_id;
  int64_t total = 0;
  int64_t completed = 0;
  int64_t failed = 0;
};

class BatchStore {
 public:
  // `db` (not owned) has BatchSchema().
  explicit BatchStore(SqliteDatabase* db) : db_(db) {}

  // A batch of `owner`'s over `lines` (its input file's, checked), running
  // from `now` until `window` (a duration: "24h") has passed.
  absl::StatusOr<StoredBatch> Create(absl::string_view owner, absl::string_view input_file_id,
                                     absl::string_view endpoint, absl::string_view window,
                                     absl::string_view metadata,
                                     const std::vector<BatchInputLine>& lines, absl::Time now);
  // NOT_FOUND unless `owner` has batch `id`.
  absl::StatusOr<StoredBatch> Get(absl::string_view owner, absl::string_view id);
  // `owner`'s batches, newest first, at most `limit`, after batch `after`
  // (a page's last id) unless it is empty.
  absl::StatusOr<std::vector<StoredBatch>> List(absl::string_view owner, absl::string_view after,
                                                int limit);
  // Stops a batch in progress: its lines not yet run never will be, and it
  // is cancelled once those running end (Finish). A batch already finished
  // or cancelling is answered as it is. NOT_FOUND as Get.
  absl::StatusOr<StoredBatch> Cancel(absl::string_view owner, absl::string_view id, absl::Time now);

  // Every owner's batches not finished (in progress or cancelling), oldest
  // first, at most `limit`: what the console shows running.
  absl::StatusOr<std::vector<StoredBatch>> Unfinished(int limit);

  // Batches in progress whose window ran out by `now`: their lines not yet
  // run never will be. Then every batch with no line waiting or running is
  // finished (completed, expired or cancelled), its files written. Returns
  // the batches finished.
  absl::StatusOr<std::vector<StoredBatch>> Finish(absl::Time now);

 private:
  absl::Status FinishOne(const StoredBatch& batch, absl::Time now);

  SqliteDatabase* const db_;
};

// The duration a completion_window names ("24h", "90m"), from a second to a
// week; INVALID_ARGUMENT otherwise.
absl::StatusOr<absl::Duration> ParseCompletionWindow(absl::string_view window);

}  // namespace omnistage

#endif  // OMNISTAGE_GATEWAY_BATCH_BATCH_STORE_H_
