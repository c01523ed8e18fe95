// ForwardedHeaders: what an HTTP request passes on to the orchestrator as gRPC
// metadata, which cannot carry every byte an HTTP header can:
//   authorization  the Authorization header, cleaned (common/bearer_token.h);
//                  one that cannot be passed on is a 401 here, saying why
//                  without echoing the token
//   trace          the W3C traceparent and tracestate headers; a malformed
//                  traceparent (or one with a byte metadata cannot carry)
//                  is dropped with its tracestate, as docs/observability.md
//                  says. When this request is traced, its own span's context
//                  instead: the orchestrator's spans are its children.
#ifndef OMNISTAGE_GATEWAY_HTTP_FORWARDED_HEADERS_H_
#define OMNISTAGE_GATEWAY_HTTP_FORWARDED_HEADERS_H_

#include <string>
#include <variant>

#include "gateway/http/api_error.h"
#include "gateway/http/http_server.h"
#include "gateway/http/trace_headers.h"

namespace omnistage {

struct ForwardedHeaders {
  std::string authorization;
  TraceHeaders trace;
};

// `exchange`'s headers as the orchestrator gets them, or the 401 to answer.
std::variant<ForwardedHeaders, ApiError> ForwardedHeadersOf(const HttpExchange& exchange);

}  // namespace omnistage

#endif  // OMNISTAGE_GATEWAY_HTTP_FORWARDED_HEADERS_H_
