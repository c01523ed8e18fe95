// PipelineCore's endings (pipeline_core.h): every request ends through
// EndRequests, once (a terminal and its record, then its leftovers stopped); a
// request whose last abort failed resumes with the outputs held meanwhile; a
// request that produces nothing for request_idle_timeout fails.
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "orchestrator/core/latency_objectives.h"
#include "orchestrator/core/pipeline_core.h"

namespace omnistage {
namespace {

v1::Terminal ErrorTerminal(const v1::Error& error) {
  v1::Terminal terminal;
  terminal.set_finish_reason(v1::FINISH_REASON_ERROR);
  *terminal.mutable_error() = error;
  return terminal;
}

}  // namespace

// ---- Endings ------------------------------------------------------------------------

void PipelineCore::EndRequests(
    const std::vector<std::string>& ids,
    const std::function<v1::Terminal(const InFlightRequest&)>& terminal_for) {
  std::vector<std::string> ended;
  ended.reserve(ids.size());
  for (const std::string& id : ids) {
    InFlightRequest* r = table_.Find(id);
    if (r == nullptr) continue;  // Ended already (or a duplicate id).
    if (r->queued) starts_.Remove(id);
    v1::Terminal terminal = terminal_for(*r);
    v1::FinishedRequest record = RecordOf(*r, terminal);
    planner_.Judge(*r, &record);
    tracing_.Ended(*r, record);
    metrics_.Heard(r->account.Heard());
    objective_metrics_.Ended(record);
    stage_audio_.Ended(*r, terminal);
    const std::string trace_id = r->trace_id;
    table_.Finish(id, std::move(terminal));
    // After the terminal's own lines (a failure's warning).
    finished_.Add(std::move(record), trace_id);
    ended.push_back(id);
  }
  // Before the drain check: a completed drain may stop the process.
  abort_.CleanUp(ended);
  starts_.Pump();  // What ended on stage 0 left its slot.
  CheckDrained();
}

v1::FinishedRequest PipelineCore::RecordOf(const InFlightRequest& r,
                                           const v1::Terminal& terminal) const {
  v1::FinishedRequest record = r.account.Close(terminal, scheduler_->Now());
  JudgeObjectives(r.objectives, &record);
  record.set_request_id(r.id);
  record.set_identity(r.caller);
  for (size_t s = 0; s < r.stages.size(); ++s) {
    const int replica = r.stages[s].replica;
    if (!r.stages[s].started || replica < 0) continue;
    v1::StageReplica* ran = record.add_stages();
    ran->set_stage_id(static_cast<int>(s));
    ran->set_replica(replica);
    ran->set_instance_id(pools_[s]->state(replica).instance_id);
  }
  return record;
}

void PipelineCore::FailRequests(const std::vector<std::string>& ids, const v1::Error& error) {
  EndRequests(ids, [&error](const InFlightRequest&) { return ErrorTerminal(error); });
}

void PipelineCore::ResumeRequest(const std::string& id) {
  InFlightRequest* r = table_.Find(id);
  if (r == nullptr) return;
  starts_.Requeue(*r);
  r = table_.Find(id);
  if (r == nullptr) return;
  std::vector<DeferredOutput> deferred = std::move(r->deferred);
  r->deferred.clear();
  for (DeferredOutput& d : deferred) {
    r = table_.Find(id);
    if (r == nullptr) break;
    // Stages whose abort succeeded have no binding: their outputs are void.
    if (pools_[d.stage]->Bound(id) != d.replica) continue;
    HandleOutput(*r, d.stage, d.replica, d.output);
  }
  r = table_.Find(id);
  if (r != nullptr) ResumeLostStages(*r);
}

// ---- Idle timeout -------------------------------------------------------------------

void PipelineCore::ArmIdleTimer(InFlightRequest& r) {
  if (config_.request_idle_timeout <= absl::ZeroDuration()) return;
  r.idle_timer = scheduler_->PostAt(r.last_activity + config_.request_idle_timeout,
                                    [this, alive = alive_.watch(), id = r.id] {
                                      if (alive) OnIdleTimer(id);
                                    });
}

void PipelineCore::OnIdleTimer(const std::string& id) {
  InFlightRequest* r = table_.Find(id);
  if (r == nullptr) return;
  r->idle_timer = 0;
  // Outputs are held while an abort runs, so last_activity stands still; while
  // its input streams in, stages may rightly wait for more (an LLM prefills the
  // whole prompt), and the input's own timer watches the client. Either way:
  // wait a whole timeout from now rather than fire again at once.
  if (r->aborting > 0 || (r->input != nullptr && r->input->open)) {
    r->last_activity = scheduler_->Now();
    ArmIdleTimer(*r);
    return;
  }
  if (scheduler_->Now() - r->last_activity < config_.request_idle_timeout) {
    ArmIdleTimer(*r);
    return;
  }
  // Blame the first stage still working on it.
  int stage = 0;
  while (stage < r->last_stage && (r->stages[stage].finished || !r->stages[stage].started)) {
    ++stage;
  }
  FailRequests({id},
               StageErrorAt(absl::StatusCode::kDeadlineExceeded, stage, r->stages[stage].replica,
                            absl::StrCat("produced nothing for ",
                                         absl::FormatDuration(config_.request_idle_timeout),
                                         " (request_idle_timeout)")));
}

}  // namespace omnistage
