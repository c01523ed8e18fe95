// TraceHeaders: the W3C trace context a call to the orchestrator carries as
// gRPC metadata (docs/observability.md, "Traces"):
//   traceparent  the context the orchestrator's spans are children of
//   tracestate   the vendors' state that goes with it, as the client sent it
// Each is sent only when set.
//
//   TraceHeaders trace = std::get<ForwardedHeaders>(forwarded).trace;
//   trace.AddTo(context);  // before the call starts
#ifndef OMNISTAGE_GATEWAY_HTTP_TRACE_HEADERS_H_
#define OMNISTAGE_GATEWAY_HTTP_TRACE_HEADERS_H_

#include <grpcpp/client_context.h>

#include <string>

namespace omnistage {

struct TraceHeaders {
  std::string traceparent;
  std::string tracestate;

  void AddTo(grpc::ClientContext& context) const;
};

}  // namespace omnistage

#endif  // OMNISTAGE_GATEWAY_HTTP_TRACE_HEADERS_H_
