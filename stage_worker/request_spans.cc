#include "stage_worker/request_spans.h"

#include <optional>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/time/clock.h"
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
  End(running, output.finish_reason(), output.has_error() ? output.error().message() : "");
  running_.erase(it);
}

void RequestSpans::Ended(uint64_t session, const std::string& id, v1::FinishReason reason,
                         const std::string& error) {
  if (!enabled()) return;
  absl::MutexLock lock(&mu_);
  auto it = running_.find(Key{session, id});
  if (it == running_.end()) return;
  End(it->second, reason, error);
  running_.erase(it);
}

void RequestSpans::SessionClosed(uint64_t session) {
  if (!enabled()) return;
  absl::MutexLock lock(&mu_);
  std::vector<Key> closed;
  for (auto& [key, running] : running_) {
    if (key.first != session) continue;
    End(running, v1::FINISH_REASON_ABORT, "");
    closed.push_back(key);
  }
  for (const Key& key : closed) running_.erase(key);
}

void RequestSpans::End(Running& running, v1::FinishReason reason, const std::string& error) {
  const absl::Time now = absl::Now();
  Span& span = running.span;
  if (reason == v1::FINISH_REASON_ABORT) span.Event("aborted", now);
  std::string name = v1::FinishReason_Name(reason);
  if (absl::StartsWith(name, "FINISH_REASON_")) name = absl::AsciiStrToLower(name.substr(14));
  span.Set("gen_ai.response.finish_reasons", name);
  span.Set("omnistage.steps", running.steps);
  if (reason == v1::FINISH_REASON_ERROR) span.Error(error);
  tracer_->End(span, now);
}

}  // namespace omnistage
