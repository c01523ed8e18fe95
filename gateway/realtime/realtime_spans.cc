#include "gateway/realtime/realtime_spans.h"

#include <optional>
#include <utility>

#include "absl/time/clock.h"
#include "common/tracing/trace_context.h"

namespace omnistage {

RealtimeSpans::RealtimeSpans(const Tracer* tracer, TraceHeaders upgrade,
                             const std::string& session_id)
    : tracer_(tracer != nullptr && tracer->enabled() ? tracer : nullptr),
      upgrade_(std::move(upgrade)) {
  if (tracer_ == nullptr) return;
  const std::optional<TraceContext> parent =
      TraceContext::Parse(upgrade_.traceparent, upgrade_.tracestate);
  session_ = tracer_->Start("realtime session", Span::Kind::kInternal,
                            parent.has_value() ? &*parent : nullptr, absl::Now());
  session_.Set("omnistage.realtime.session_id", session_id);
}

RealtimeSpans::~RealtimeSpans() {
  // A response the session never saw end (it went with its connection).
  if (response_.started()) ResponseEnded("cancelled", "");
  Close();
}

TraceHeaders RealtimeSpans::HeadersOf(const Span& span) const {
  if (!span.started()) return upgrade_;
  return {span.context().Traceparent(), span.context().trace_state};
}

TraceHeaders RealtimeSpans::Session() const { return HeadersOf(session_); }

TraceHeaders RealtimeSpans::Response() const {
  return HeadersOf(response_.started() ? response_ : session_);
}

void RealtimeSpans::ResponseBegan(const std::string& response_id) {
  if (tracer_ == nullptr || !session_.started()) return;
  response_ =
      tracer_->Start("realtime response", Span::Kind::kInternal, &session_.context(), absl::Now());
  response_.Set("omnistage.realtime.response_id", response_id);
}

void RealtimeSpans::ResponseEnded(absl::string_view status, absl::string_view error) {
  if (!response_.started()) return;
  response_.Set("omnistage.realtime.status", status);
  if (!error.empty()) response_.Error(error);
  tracer_->End(response_, absl::Now());
}

void RealtimeSpans::Close() {
  if (session_.started()) tracer_->End(session_, absl::Now());
}

}  // namespace omnistage
