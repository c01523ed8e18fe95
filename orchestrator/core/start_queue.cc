#include "orchestrator/core/start_queue.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/error_proto.h"
#include "common/invariant.h"
#include "common/log.h"
#include "common/retry_hint.h"
#include "orchestrator/core/caller.h"
#include "orchestrator/core/latency_objectives.h"

namespace omnistage {
namespace {

// When a refused or ended request may try again: a slot's turnaround is not
// known here, so the hint is a short, fixed wait.
constexpr absl::Duration kRetryHint = absl::Seconds(1);

absl::Status QueueError(absl::StatusCode code, absl::string_view why) {
  return RetryLater(code, absl::StrCat(why, " (another orchestrator may take it now)"), kRetryHint);
}

}  // namespace

StartQueue::StartQueue(CoreParts core, Hooks hooks) : core_(core), hooks_(std::move(hooks)) {}

bool StartQueue::MustWait(const InFlightRequest& r) const {
  if (core_.config->max_queued == 0) return false;
  if (!queue_.empty()) return true;
  const StagePool& first = core_.pool(0);
  if (!first.HasLiveReplica()) return false;  // It fails at once.
  if (r.batch && !first.HasBatchSlot(core_.config->batch_reserve)) return true;
  return !first.HasFreeSlot(core_.config->admission_headroom) ||
         (hooks_.audio_waits && hooks_.audio_waits(&r));
}

absl::Status StartQueue::Add(InFlightRequest& r, std::string prompt, int priority, int weight) {
  const std::string id = r.id;
  QueueAddResult added =
      queue_.Add({id, r.caller, priority, weight,
                  ObjectiveDeadline(r.objectives, r.wants_audio, r.account.admitted()),
                  r.objectives.criticality() == v1::CRITICALITY_CRITICAL},
                 static_cast<size_t>(core_.config->max_queued));
  if (!added.queued) {
    core_.metrics->QueueRefused("full");
    return QueueError(
        absl::StatusCode::kResourceExhausted,
        absl::StrCat("the admission queue is full: ", core_.config->max_queued,
                     " requests wait (limits.max_queued) for stage 0 (",
                     core_.config->stages[0].name, "), none of a priority below ", priority));
  }
  core_.table->SetQueued(r, true);
  r.priority = priority;
  r.weight = weight;
  r.queued_at = core_.scheduler->Now();
  r.queued_prompt = std::move(prompt);
  r.queue_timer = core_.scheduler->PostAt(r.queued_at + core_.config->max_queue_wait,
                                          [this, id, alive = alive_.watch()] {
                                            if (alive) OnTimer(id);
                                          });
  Log(LogLevel::kDebug, ContextOf(r),
      absl::StrCat("queued at priority ", priority, " (", queue_.size(), " waiting)"));
  r.sink->Started(id);
  if (added.shed.has_value()) {
    core_.metrics->QueueRefused("shed");
    hooks_.fail(
        {*added.shed},
        ErrorProto(QueueError(
            absl::StatusCode::kResourceExhausted,
            absl::StrCat("shed from the full admission queue (limits.max_queued is ",
                         core_.config->max_queued, ") for a request of priority ", priority))));
  }
  return absl::OkStatus();
}

void StartQueue::Pump() {
  if (pumping_ || held_) return;
  pumping_ = true;
  const StagePool& first = core_.pool(0);
  while (!queue_.empty() && first.HasFreeSlot(core_.config->admission_headroom) &&
         !(hooks_.audio_waits && hooks_.audio_waits(nullptr))) {
    // Work that can wait leaves last (its priority is below every other),
    // and only within its share of stage 0.
    if (queue_.CountAt(kBatchPriority) == queue_.size() &&
        !first.HasBatchSlot(core_.config->batch_reserve)) {
      break;
    }
    const std::string id = *queue_.Pop();
    InFlightRequest* r = core_.table->Find(id);
    if (!OMNISTAGE_INVARIANT_HOLDS(r != nullptr && r->queued, (LogContext{id, 0, -1, ""}),
                                   "a queued id that is not a queued request")) {
      continue;
    }
    // Being aborted: it must not start anywhere behind its abort's back. It
    // stays out of the queue; the abort ends it (or, failing, requeues it).
    if (r->aborting > 0) continue;
    core_.table->SetQueued(*r, false);
    core_.scheduler->Cancel(r->queue_timer);
    r->queue_timer = 0;
    const absl::Duration waited = core_.scheduler->Now() - r->queued_at;
    core_.metrics->LeftQueue(waited);
    Log(LogLevel::kDebug, ContextOf(*r),
        absl::StrCat("leaves the admission queue after ", absl::FormatDuration(waited)));
    if (std::optional<v1::Error> error = hooks_.start(*r)) hooks_.fail({id}, *error);
  }
  pumping_ = false;
}

void StartQueue::Release() {
  held_ = false;
  Pump();
}

void StartQueue::Requeue(InFlightRequest& r) {
  if (!r.queued || queue_.Contains(r.id)) return;
  queue_.Add({r.id, r.caller, r.priority, r.weight}, static_cast<size_t>(-1));
  Pump();
}

void StartQueue::OnTimer(const std::string& id) {
  InFlightRequest* r = core_.table->Find(id);
  if (r == nullptr || !r->queued) return;
  r->queue_timer = 0;
  core_.metrics->QueueRefused("expired");
  hooks_.fail({id}, ErrorProto(QueueError(
                        absl::StatusCode::kResourceExhausted,
                        absl::StrCat("waited ", absl::FormatDuration(core_.config->max_queue_wait),
                                     " in the admission queue (limits.max_queue_ms) for a free "
                                     "slot on stage 0 (",
                                     core_.config->stages[0].name, ")"))));
}

void StartQueue::RefuseAll(const v1::Error& error) {
  std::vector<std::string> ids = queue_.Ids();
  if (ids.empty()) return;
  for (size_t i = 0; i < ids.size(); ++i) core_.metrics->QueueRefused("draining");
  hooks_.fail(ids, error);
}

}  // namespace omnistage
