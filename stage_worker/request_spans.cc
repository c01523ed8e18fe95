#include "stage_worker/request_spans.h"

#include <optional>
#include <vector>

#include "absl/time/clock.h"
#include "common/modality.h"
#include "common/tracing/trace_context.h"

namespace omnistage {

RequestSpans::RequestSpans(const Tracer* tracer, Identity identity)
    : tracer_(tracer), identity_(std::move(identity)) {}

void RequestSpans::Added(uint64_t session, const std::string& id, const std::string& traceparent,
                         const std::string& tracestate) {
  if (!enabled()) return;
  std::optional<TraceContext> parent = TraceContext::Parse(traceparent, tracestate);
  Running running;
  running.span =
      tracer_->Start("engine", Span::Kind::kServer, parent ? &*parent : nullptr, absl::Now());
  if (!running.span.recording()) return;
  Span& span = running.span;
  span.Set("omnistage.request_id", id);
  span.Set("omnistage.stage_id", identity_.stage_id);
  span.Set("omnistage.instance_id", identity_.instance_id);
  span.Set("omnistage.engine", identity_.engine);
  span.Set("omnistage.session", static_cast<int64_t>(session));
  absl::MutexLock lock(&mu_);
  running_[{session, id}] = std::move(running);
}

void RequestSpans::Taken(uint64_t session, const std::string& id) {
  if (!enabled()) return;
  absl::MutexLock lock(&mu_);
  auto it = running_.find(Key{session, id});
  if (it != running_.end()) it->second.span.Event("taken", absl::Now());
}

void RequestSpans::Output(uint64_t session, const v1::RequestOutput& output) {
  if (!enabled()) return;
  Running finished;
  {
    absl::MutexLock lock(&mu_);
    auto it = running_.find(Key{session, output.request_id()});
    if (it == running_.end()) return;
    Running& running = it->second;
    ++running.steps;
    if (output.payloads_size() > 0 && !running.output) {
      running.output = true;
      running.span.Event("first_output", absl::Now());
    }
    if (!output.finished()) return;
    finished = std::move(running);
    running_.erase(it);
  }
  End(finished, output.finish_reason(), output.has_error() ? output.error().message() : "");
}

void RequestSpans::Ended(uint64_t session, const std::string& id, v1::FinishReason reason,
                         const std::string& error) {
  if (!enabled()) return;
  Running ended;
  {
    absl::MutexLock lock(&mu_);
    auto it = running_.find(Key{session, id});
    if (it == running_.end()) return;
    ended = std::move(it->second);
    running_.erase(it);
  }
  End(ended, reason, error);
}

void RequestSpans::SessionClosed(uint64_t session) {
  if (!enabled()) return;
  std::vector<Running> closed;
  {
    absl::MutexLock lock(&mu_);
    for (auto it = running_.begin(); it != running_.end();) {
      if (it->first.first != session) {
        ++it;
        continue;
      }
      closed.push_back(std::move(it->second));
      running_.erase(it++);
    }
  }
  for (Running& running : closed) End(running, v1::FINISH_REASON_ABORT, "");
}

void RequestSpans::End(Running& running, v1::FinishReason reason, const std::string& error) {
  const absl::Time now = absl::Now();
  Span& span = running.span;
  if (reason == v1::FINISH_REASON_ABORT) span.Event("aborted", now);
  span.Set("gen_ai.response.finish_reasons", FinishReasonName(reason));
  span.Set("omnistage.steps", running.steps);
  if (reason == v1::FINISH_REASON_ERROR) span.Error(error);
  tracer_->End(span, now);
}

}  // namespace omnistage
