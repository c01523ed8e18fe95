// BatchRunner: runs the Batch API's lines (docs/openai.md, "Batches") on
// the capacity interactive traffic leaves: at most `concurrency` at once
// over all batches, each as work that can wait (below every priority in the
// orchestrator's admission queue, the first shed), claimed from the store a
// few at a time round robin over the batches, each result recorded once
// (batch_lines.h). A line refused as the pipeline is full or out of reach
// waits and is tried again, the runner backing off (1 s doubling to 30 s)
// while refusals go on. Batches whose lines all ended are finished (their
// files written) on the next tick. At start, lines a stopped gateway left
// running run again.
//
// Loop thread, except in_flight() and the constructor/destructor (any
// thread; the ticker thread posts ticks to the loop).
#ifndef OMNISTAGE_GATEWAY_BATCH_RUNNER_H_
#define OMNISTAGE_GATEWAY_BATCH_RUNNER_H_

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "common/metrics.h"
#include "gateway/batch/batch_lines.h"
#include "gateway/batch/batch_store.h"
#include "gateway/batch/store_thread.h"
#include "gateway/batch_line.h"
#include "gateway/http/recorded_reply.h"

namespace omnistage {

class BatchRunner {
 public:
  struct Options {
    BatchTargets targets;
    // Lines running at once, over every batch.
    int concurrency = 16;
    // How often it looks for lines and finished batches without being woken.
    absl::Duration tick = absl::Seconds(1);
  };

  // `store` (not owned) outlives the runner. Registers its metrics.
  BatchRunner(Options options, StoreThread* store, LoopPoster post, MetricsRegistry* registry);
  ~BatchRunner();
  BatchRunner(const BatchRunner&) = delete;
  BatchRunner& operator=(const BatchRunner&) = delete;

  // Puts back the lines a stopped gateway left running, then begins.
  void Start();
  // Looks for lines now (a batch was created).
  void Wake();
  // Takes no more lines; those running go on.
  void Drain();
  // Gives up the lines still running: unrecorded, they run again at the next
  // start.
  void Abandon();
  // Lines running. Thread-safe.
  int in_flight() const { return in_flight_.load(); }

 private:
  using LineKey = std::pair<std::string, int64_t>;
  void Tick();
  void Claimed(std::vector<ClaimedLine> lines, std::vector<StoredBatch> finished);
  void Ended(const ClaimedLine& line, BatchLineOutcome outcome);

  const Options options_;
  StoreThread* const store_;
  const LoopPoster post_;
  Gauge& running_;
  Family<Counter>& lines_;
  Family<Counter>& batches_;
  std::atomic<int> in_flight_{0};
  std::map<LineKey, std::shared_ptr<RecordedReply>> replies_;
  bool started_ = false;
  bool claiming_ = false;
  bool draining_ = false;
  // Refusals in a row, and no claims before `paused_until_`.
  int refusals_ = 0;
  absl::Time paused_until_ = absl::InfinitePast();
  absl::Notification stop_;
  std::thread ticker_;
};

}  // namespace omnistage

#endif  // OMNISTAGE_GATEWAY_BATCH_RUNNER_H_
