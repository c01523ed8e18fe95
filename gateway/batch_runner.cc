#include "gateway/batch_runner.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/log.h"
#include "gateway/batch/batch_store.h"

namespace omnistage {
namespace {

constexpr absl::Duration kFirstBackoff = absl::Seconds(1);
constexpr absl::Duration kMaxBackoff = absl::Seconds(30);

const char* KindName(BatchLineOutcome::Kind kind) {
  switch (kind) {
    case BatchLineOutcome::Kind::kDone:
      return "completed";
    case BatchLineOutcome::Kind::kFailed:
      return "failed";
    case BatchLineOutcome::Kind::kRetry:
      return "retried";
    case BatchLineOutcome::Kind::kAbandoned:
      return "abandoned";
  }
  return "failed";
}

}  // namespace

BatchRunner::BatchRunner(Options options, StoreThread* store, LoopPoster post,
                         MetricsRegistry* registry)
    : options_(std::move(options)),
      store_(store),
      post_(std::move(post)),
      running_(registry
                   ->AddGauge("omnistage_gateway_batch_lines_running",
                              "Batch API lines running now (at most --batch_concurrency).")
                   .With({})),
      lines_(registry->AddCounter(
          "omnistage_gateway_batch_lines_total",
          "Batch API lines that ended a run, by outcome: completed (in the output file), failed "
          "(in the error file), retried (refused as the pipeline was full or out of reach: it "
          "runs again), abandoned (the gateway stopped: it runs again at the next start).",
          {"outcome"})),
      batches_(registry->AddCounter("omnistage_gateway_batches_total",
                                    "Batches finished, by status: completed, expired, cancelled.",
                                    {"status"})) {
  for (const char* outcome : {"completed", "failed", "retried", "abandoned"}) {
    lines_.With({outcome});  // Shown at 0.
  }
  for (const char* status : {"completed", "expired", "cancelled"}) batches_.With({status});
}

BatchRunner::~BatchRunner() {
  stop_.Notify();
  if (ticker_.joinable()) ticker_.join();
}

void BatchRunner::Start() {
  store_->Post([post = post_, this](SqliteDatabase& db) {
    absl::StatusOr<int64_t> requeued = BatchLines(&db).Requeue();
    if (!requeued.ok()) {
      LogError(absl::StrCat("batch runner: lines left running could not be put back: ",
                            requeued.status().message()));
    } else if (*requeued > 0) {
      LogInfo(absl::StrCat("batch runner: ", *requeued,
                           " line(s) running when the gateway stopped run again"));
    }
    post([this] {
      started_ = true;
      Tick();
    });
  });
  ticker_ = std::thread([this] {
    while (!stop_.WaitForNotificationWithTimeout(options_.tick)) {
      post_([this] { Tick(); });
    }
  });
}

void BatchRunner::Wake() { Tick(); }

void BatchRunner::Drain() { draining_ = true; }

void BatchRunner::Abandon() {
  draining_ = true;
  // Each one's end is posted (RunBatchLine): Ended erases it later.
  for (auto& [key, reply] : replies_) reply->Close();
}

void BatchRunner::Tick() {
  if (!started_ || claiming_) return;
  const int free = draining_ || absl::Now() < paused_until_
                       ? 0
                       : options_.concurrency - static_cast<int>(replies_.size());
  claiming_ = true;
  store_->Post([this, free](SqliteDatabase& db) {
    std::vector<ClaimedLine> lines;
    if (free > 0) {
      absl::StatusOr<std::vector<ClaimedLine>> claimed = BatchLines(&db).Claim(free);
      if (claimed.ok()) {
        lines = *std::move(claimed);
      } else {
        LogError(absl::StrCat("batch runner: claiming lines: ", claimed.status().message()));
      }
    }
    std::vector<StoredBatch> finished;
    absl::StatusOr<std::vector<StoredBatch>> done = BatchStore(&db).Finish(absl::Now());
    if (done.ok()) {
      finished = *std::move(done);
    } else {
      LogError(absl::StrCat("batch runner: finishing batches: ", done.status().message()));
    }
    post_([this, lines = std::move(lines), finished = std::move(finished)]() mutable {
      Claimed(std::move(lines), std::move(finished));
    });
  });
}

void BatchRunner::Claimed(std::vector<ClaimedLine> lines, std::vector<StoredBatch> finished) {
  claiming_ = false;
  for (const StoredBatch& batch : finished) {
    batches_.With({batch.status}).Increment();
    LogInfo(absl::StrCat("batch ", batch.id, " of '", batch.owner, "' ", batch.status, ": ",
                         batch.completed, " of ", batch.total, " line(s) completed, ", batch.failed,
                         " failed"));
  }
  for (ClaimedLine& line : lines) {
    if (draining_) break;  // They stay running in the store: the next start runs them.
    ++in_flight_;
    running_.Add(1);
    // Its end is posted, never within RunBatchLine.
    replies_[{line.batch_id, line.line}] =
        RunBatchLine(line, options_.targets, post_,
                     [this, line](BatchLineOutcome outcome) { Ended(line, std::move(outcome)); });
  }
}

void BatchRunner::Ended(const ClaimedLine& line, BatchLineOutcome outcome) {
  replies_.erase({line.batch_id, line.line});
  --in_flight_;
  running_.Add(-1);
  lines_.With({KindName(outcome.kind)}).Increment();
  switch (outcome.kind) {
    case BatchLineOutcome::Kind::kAbandoned:
      return;
    case BatchLineOutcome::Kind::kRetry: {
      ++refusals_;
      const absl::Duration backoff =
          std::min(kMaxBackoff, kFirstBackoff * (1 << std::min(refusals_ - 1, 5)));
      paused_until_ = absl::Now() + backoff;
      LogWarning(absl::StrCat("batch ", line.batch_id, " line ", line.line, " refused (HTTP ",
                              outcome.status, "), tried again in ", absl::FormatDuration(backoff),
                              ": ", outcome.reason));
      store_->Post([batch_id = line.batch_id, number = line.line](SqliteDatabase& db) {
        if (absl::Status s = BatchLines(&db).Retry(batch_id, number); !s.ok()) {
          LogError(absl::StrCat("batch ", batch_id, " line ", number,
                                ": putting it back: ", s.message()));
        }
      });
      return;
    }
    case BatchLineOutcome::Kind::kDone:
    case BatchLineOutcome::Kind::kFailed:
      break;
  }
  refusals_ = 0;
  paused_until_ = absl::InfinitePast();
  const bool ok = outcome.kind == BatchLineOutcome::Kind::kDone;
  store_->Post([this, line, ok, result = std::move(outcome.result)](SqliteDatabase& db) {
    absl::StatusOr<BatchLines::Kept> kept = BatchLines(&db).Keep(line, ok, result);
    const std::string where = absl::StrCat("batch ", line.batch_id, " line ", line.line);
    if (!kept.ok()) {
      LogError(absl::StrCat(where, ": nothing of it could be stored (", kept.status().message(),
                            "); it stays running until the next start"));
    } else if (*kept == BatchLines::Kept::kFailedUnstored) {
      LogError(absl::StrCat(where,
                            ": its result could not be stored; it failed with "
                            "result_not_stored"));
    } else if (*kept == BatchLines::Kept::kWaitsAgain) {
      LogError(absl::StrCat(where, ": its result could not be stored; it runs again"));
    }
    post_([this] { Tick(); });
  });
}

}  // namespace omnistage
