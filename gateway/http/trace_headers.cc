#include "gateway/http/trace_headers.h"

namespace omnistage {

void TraceHeaders::AddTo(grpc::ClientContext& context) const {
  if (!traceparent.empty()) context.AddMetadata("traceparent", traceparent);
  if (!tracestate.empty()) context.AddMetadata("tracestate", tracestate);
}

}  // namespace omnistage
