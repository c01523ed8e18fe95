// TraceContext: where a span stands in a W3C Trace Context trace
// (https://www.w3.org/TR/trace-context/): the trace id, the span id, the
// trace flags and the vendors' tracestate, as a `traceparent` header (HTTP)
// or metadata key (gRPC) carries them between processes
// (docs/observability.md, "Traces").
//
//   std::optional<TraceContext> parent = TraceContext::Parse(traceparent, tracestate);
//   TraceContext child = parent->Child();        // same trace, a new span id
//   metadata.emplace("traceparent", child.Traceparent());
//
// Ids are raw bytes (16 for a trace, 8 for a span), as OTLP carries them.
#ifndef OMNISTAGE_COMMON_TRACING_TRACE_CONTEXT_H_
#define OMNISTAGE_COMMON_TRACING_TRACE_CONTEXT_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"

namespace omnistage {

struct TraceContext {
  static constexpr uint8_t kSampled = 0x01;
  // The longest tracestate kept (the W3C limit: 32 members of at most 256
  // characters each; a longer header is dropped whole, as the spec allows).
  static constexpr size_t kMaxTraceState = 8192;

  std::string trace_id;  // 16 bytes, not all zero
  std::string span_id;   // 8 bytes, not all zero
  uint8_t flags = 0;
  std::string trace_state;

  // A `traceparent` of version 00 (or a later version's first four fields),
  // with `tracestate` kept as it came when not too long and printable ASCII
  // (as W3C defines it; anything else is dropped whole). nullopt for a
  // malformed one or one with an all-zero id: the receiver starts a new
  // trace, as the spec says.
  static std::optional<TraceContext> Parse(absl::string_view traceparent,
                                           absl::string_view tracestate = "");
  // A new trace's root, with the given flags.
  static TraceContext NewRoot(uint8_t flags);

  // The same trace and flags, with a new span id.
  TraceContext Child() const;
  bool sampled() const { return (flags & kSampled) != 0; }
  // "00-<32 hex>-<16 hex>-<2 hex>".
  std::string Traceparent() const;
  // The trace id in lowercase hex (what the log lines print).
  std::string TraceIdHex() const;
};

// The trace id (lowercase hex) of a traceparent Parse accepts, or "" (the
// header is then ignored, as the spec says): what log lines carry.
std::string TraceIdOf(absl::string_view traceparent);

// `bytes` random bytes, never all zero (fast, not secret: ids only).
std::string RandomTraceBytes(size_t bytes);

}  // namespace omnistage

#endif  // OMNISTAGE_COMMON_TRACING_TRACE_CONTEXT_H_
