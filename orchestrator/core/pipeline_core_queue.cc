// PipelineCore's admission queue: a new request waits here while stage 0 has
// no free slot, and leaves in the order admission_queue.h gives (priority, then
// fair share between identities, then arrival). A queued request has started
// (its client has its id): it can be aborted or cancelled, ending at once with
// its terminal ABORT (no worker holds anything of it); a wait past
// limits.max_queue_ms, a shed for a higher priority and a drain end it with an
// error terminal that says why and when to retry.
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/error_proto.h"
#include "common/invariant.h"
#include "common/log.h"
#include "common/retry_hint.h"
#include "orchestrator/core/pipeline_core.h"

namespace omnistage {
namespace {

// When a refused or ended request may try again: a slot's turnaround is not
// known here, so the hint is a short, fixed wait.
constexpr absl::Duration kRetryHint = absl::Seconds(1);

v1::Error QueueError(absl::StatusCode code, absl::string_view why) {
  return ErrorProto(
      RetryLater(code, absl::StrCat(why, " (another orchestrator may take it now)"), kRetryHint));
}

}  // namespace

bool PipelineCore::MustQueue() const {
  if (config_.max_queued == 0) return false;
  if (!queue_.empty()) return true;
  const StagePool& first = *pools_[0];
  return first.HasLiveReplica() && !first.HasFreeSlot(config_.admission_headroom);
}

bool PipelineCore::Enqueue(InFlightRequest& r, std::string prompt, int priority, int weight) {
  const std::string id = r.id;
  QueueAddResult added = queue_.Add({id, r.caller, priority, weight},
                                    static_cast<size_t>(config_.max_queued));
  if (!added.queued) {
    // Nothing started anywhere: the call itself fails.
    std::shared_ptr<ResponseSink> failed = r.sink;
    table_.Remove(id);
    failed->Fail(StatusFromErrorProto(QueueError(
        absl::StatusCode::kResourceExhausted,
        absl::StrCat("the admission queue is full: ", config_.max_queued,
                     " requests wait (limits.max_queued) for stage 0 (", config_.stages[0].name,
                     "), none of a priority below ", priority))));
    metrics_.QueueRefused("full");
    CheckDrained();
    return false;
  }
  r.queued = true;
  r.priority = priority;
  r.weight = weight;
  r.queued_at = scheduler_->Now();
  r.queued_prompt = std::move(prompt);
  r.queue_timer = scheduler_->PostAt(r.queued_at + config_.max_queue_wait,
                                     [this, id, alive = std::weak_ptr<bool>(alive_)] {
                                       if (!alive.expired()) OnQueueTimer(id);
                                     });
  Log(LogLevel::kDebug, ContextOf(r),
      absl::StrCat("queued at priority ", priority, " (", queue_.size(), " waiting)"));
  r.sink->Started(id);
  if (added.shed.has_value()) {
    metrics_.QueueRefused("shed");
    FailRequests({*added.shed},
                 QueueError(absl::StatusCode::kResourceExhausted,
                            absl::StrCat("shed from the full admission queue (limits.max_queued "
                                         "is ",
                                         config_.max_queued, ") for a request of priority ",
                                         priority)));
  }
  return true;
}

void PipelineCore::PumpQueue() {
  // A send that fails ends its request, which may come back here: the loop
  // below goes on instead.
  if (pumping_ || holding_queue_) return;
  pumping_ = true;
  while (!queue_.empty() && pools_[0]->HasFreeSlot(config_.admission_headroom)) {
    const std::string id = *queue_.Pop();
    InFlightRequest* r = table_.Find(id);
    if (!OMNISTAGE_INVARIANT_HOLDS(r != nullptr && r->queued, (LogContext{id, 0, -1, ""}),
                                   "a queued id that is not a queued request")) {
      continue;
    }
    // Being aborted: it must not start anywhere behind its abort's back. It
    // stays out of the queue; the abort ends it (or, failing, requeues it:
    // RequeueIfParked).
    if (r->aborting > 0) continue;
    r->queued = false;
    scheduler_->Cancel(r->queue_timer);
    r->queue_timer = 0;
    metrics_.LeftQueue(scheduler_->Now() - r->queued_at);
    Log(LogLevel::kDebug, ContextOf(*r),
        absl::StrCat("leaves the admission queue after ",
                     absl::FormatDuration(scheduler_->Now() - r->queued_at)));
    if (std::optional<v1::Error> error = StartFirstStage(*r, std::move(r->queued_prompt))) {
      FailRequests({id}, *error);
      continue;
    }
    ArmIdleTimer(*r);
  }
  pumping_ = false;
}

void PipelineCore::RequeueIfParked(InFlightRequest& r) {
  if (!r.queued || queue_.Contains(r.id)) return;
  // Back where it was in its priority: behind its identity's others.
  queue_.Add({r.id, r.caller, r.priority, r.weight}, static_cast<size_t>(-1));
  PumpQueue();
}

void PipelineCore::OnQueueTimer(const std::string& id) {
  InFlightRequest* r = table_.Find(id);
  if (r == nullptr || !r->queued) return;
  r->queue_timer = 0;
  metrics_.QueueRefused("expired");
  FailRequests({id},
               QueueError(absl::StatusCode::kResourceExhausted,
                          absl::StrCat("waited ", absl::FormatDuration(config_.max_queue_wait),
                                       " in the admission queue (limits.max_queue_ms) for a free "
                                       "slot on stage 0 (",
                                       config_.stages[0].name, ")")));
}

void PipelineCore::RefuseQueued(const v1::Error& error) {
  std::vector<std::string> ids = queue_.Ids();
  if (ids.empty()) return;
  for (size_t i = 0; i < ids.size(); ++i) metrics_.QueueRefused("draining");
  FailRequests(ids, error);
}

std::optional<v1::Error> PipelineCore::StartFirstStage(InFlightRequest& r, std::string prompt) {
  std::vector<v1::Payload> input;
  // A streamed-input request may start with no prompt: its input follows.
  if (!prompt.empty()) input.emplace_back().mutable_text()->set_text(std::move(prompt));
  if (r.input == nullptr) return StartStage(r, 0, std::move(input), /*complete=*/true);
  // What streamed in while it waited in the queue goes with it.
  for (v1::Payload& p : r.input->held) input.push_back(std::move(p));
  r.input->held.clear();
  return StartStage(r, 0, std::move(input), /*complete=*/!r.input->open);
}

}  // namespace omnistage
