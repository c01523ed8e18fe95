// RealtimeSpans: a Realtime session's spans (docs/observability.md, "Traces"),
// under the upgrade's HTTP span:
//   realtime session   from the upgrade to the connection's close;
//                      omnistage.realtime.session_id
//   realtime response  from response.created to response.done, the session
//                      span's child; omnistage.realtime.response_id,
//                      omnistage.realtime.status (completed, cancelled,
//                      interrupted, incomplete, failed), an error status
//                      when it failed
// and the trace context each call to the orchestrator carries: a response's
// Generate is the response span's child; an audio turn's GenerateDuplex,
// which starts with the turn's first audio (before its response), is the
// session span's. Without a tracer nothing is recorded and every call
// carries the upgrade request's own trace headers, as a chat completion's.
// Loop thread.
//
//   RealtimeSpans spans(tracer, forwarded.trace, session_id);
//   spans.ResponseBegan(response_id);  // its call carries spans.Response()
//   spans.ResponseEnded("completed", "");
//   spans.Close();
#ifndef OMNISTAGE_GATEWAY_REALTIME_REALTIME_SPANS_H_
#define OMNISTAGE_GATEWAY_REALTIME_REALTIME_SPANS_H_

#include <string>

#include "absl/strings/string_view.h"
#include "common/tracing/span.h"
#include "common/tracing/tracer.h"
#include "gateway/http/trace_headers.h"

namespace omnistage {

class RealtimeSpans {
 public:
  // `tracer` (not owned; may be null) outlives this; `upgrade` is what the
  // upgrade request passes on (its HTTP span's context when traced).
  RealtimeSpans(const Tracer* tracer, TraceHeaders upgrade, const std::string& session_id);
  ~RealtimeSpans();
  RealtimeSpans(const RealtimeSpans&) = delete;
  RealtimeSpans& operator=(const RealtimeSpans&) = delete;

  // The headers of a call of the session (an audio turn's), and of the
  // running response's.
  TraceHeaders Session() const;
  TraceHeaders Response() const;

  void ResponseBegan(const std::string& response_id);
  // `status` as response.done says it; `error`: why it failed ("" if not).
  void ResponseEnded(absl::string_view status, absl::string_view error);
  // The connection closed: ends the session's span (a running response's
  // ends as it ends, or with this object, as cancelled).
  void Close();

 private:
  TraceHeaders HeadersOf(const Span& span) const;

  const Tracer* const tracer_;
  const TraceHeaders upgrade_;
  Span session_;
  Span response_;
};

}  // namespace omnistage

#endif  // OMNISTAGE_GATEWAY_REALTIME_REALTIME_SPANS_H_
