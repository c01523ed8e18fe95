#include "stage_worker/stall_guard.h"


#include <utility>

#include "absl/strings/str_cat.h"
#include "common/log.h"

namespace omnistage {

StallGuard::StallGuard(StallOptions options, Hooks hooks, LogContext log_context)
    : options_(options),
      hooks_(std::move(hooks)),
      log_context_(std::move(log_context)),
      watchdog_(options,
                StepWatchdog::Callbacks{
                    [this](uint64_t step, absl::Duration running) { OnStall(step, running); },
                    [this](uint64_t step, absl::Duration running) { OnExit(step, running); },
                    [this](uint64_t step, absl::Duration took) { OnRecover(step, took); }}) {}

uint64_t StallGuard::stalled_step() const {
  absl::MutexLock lock(&mu_);
  return stalled_step_;
}

std::optional<v1::WorkerEvent> StallGuard::StalledEvent() const {
  absl::MutexLock lock(&mu_);
  if (stalled_step_ == 0) return std::nullopt;
  return stalled_event_;
}

void StallGuard::set_on_exit(std::function<void(const absl::Status&)> callback) {
  absl::MutexLock lock(&mu_);
  on_exit_ = std::move(callback);
}

void StallGuard::OnStall(uint64_t step, absl::Duration running) {
  std::vector<std::shared_ptr<ConnectSession>> sessions;
  v1::WorkerEvent event;
  hooks_.with_sessions([&](const std::vector<std::shared_ptr<ConnectSession>>& open) {
    sessions = open;
    absl::MutexLock lock(&mu_);
    stalled_step_ = step;
    v1::Stalled* stalled = stalled_event_.mutable_stalled();
    stalled->set_step(step);
    stalled->set_running_ms(absl::ToInt64Milliseconds(running));
    stalled->set_stall_timeout_ms(absl::ToInt64Milliseconds(options_.stall_after));
    stalled->set_exit_after_ms(absl::ToInt64Milliseconds(options_.exit_after));
    event = stalled_event_;
    for (const auto& session : sessions) lost_.emplace_back(session, session->LiveIds());
  });
  LogWarning(log_context_,
             absl::StrCat("step ", step, " has run for ", absl::FormatDuration(running),
                          " (stall timeout ", absl::FormatDuration(options_.stall_after),
                          "): NOT_SERVING; its requests are lost"));
  hooks_.set_serving(false);
  for (const auto& session : sessions) session->Send(event);
}

void StallGuard::OnRecover(uint64_t step, absl::Duration took) {
  std::vector<std::pair<std::shared_ptr<ConnectSession>, std::vector<std::string>>> lost;
  std::vector<std::shared_ptr<ConnectSession>> sessions;
  bool recovered = false;
  hooks_.with_sessions([&](const std::vector<std::shared_ptr<ConnectSession>>& open) {
    absl::MutexLock lock(&mu_);
    if (stalled_step_ != step) return;
    recovered = true;
    stalled_step_ = 0;
    lost = std::move(lost_);
    lost_.clear();
    sessions = open;
  });
  if (!recovered) return;
  LogInfo(log_context_, absl::StrCat("the stalled step ", step, " returned after ",
                                     absl::FormatDuration(took), ": SERVING again"));
  // The clients were told these requests are lost: stop them, each ending on
  // its session with a finished ABORT.
  std::vector<CoreMessage> aborts;
  for (auto& [session, ids] : lost) {
    std::vector<std::string> engine_ids;
    for (const std::string& id : ids) engine_ids.push_back(EngineRequestId(session->number(), id));
    aborts.push_back(CoreMessage::Abort(
        std::move(engine_ids),
        [session = session, ids = ids, step, spans = hooks_.spans](bool applied) {
          if (!applied) return;
          std::vector<std::string> stopped = session->TakeLive(ids);
          for (const std::string& id : stopped) {
            if (spans != nullptr) spans->Ended(session->number(), id, v1::FINISH_REASON_ABORT, "");
          }
          if (stopped.empty()) return;
          session->Send(FinishedEvent(
              stopped, v1::FINISH_REASON_ABORT,
              absl::AbortedError(absl::StrCat("lost when step ", step, " stalled"))));
        }));
  }
  if (!aborts.empty()) hooks_.submit(std::move(aborts));
  hooks_.set_serving(true);
  v1::WorkerEvent event;
  event.mutable_recovered()->set_step(step);
  event.mutable_recovered()->set_took_ms(absl::ToInt64Milliseconds(took));
  for (const auto& session : sessions) session->Send(event);
}

void StallGuard::OnExit(uint64_t step, absl::Duration running) {
  std::function<void(const absl::Status&)> on_exit;
  {
    absl::MutexLock lock(&mu_);
    on_exit = on_exit_;
  }
  const absl::Status why = absl::DeadlineExceededError(absl::StrCat(
      "step ", step, " has run for ", absl::FormatDuration(running),
      ", past the stall exit timeout ", absl::FormatDuration(options_.exit_after)));
  if (on_exit) on_exit(why);
}

}  // namespace omnistage
