// Span: one operation of a request in this process, recorded as an OTLP
// span (docs/observability.md, "Traces"): a name, a kind, start and end,
// attributes, timed events and, for a failure, an error status. The record
// is the span's encoding (opentelemetry.proto.trace.v1.Span), written into
// one string as it goes (otlp_wire.h): no message objects, one allocation
// or a few per span. A span that is not sampled records nothing and costs
// next to nothing, but still carries its trace context, so that the next
// process follows the decision.
//
//   Span span = tracer.Start("Generate", Span::Kind::kServer, parent, now);
//   span.Set("omnistage.identity", "alice");
//   span.Event("first_output", at);
//   metadata.emplace("traceparent", span.context().Traceparent());
//   tracer.End(std::move(span), now);
//
// Not thread-safe: a span belongs to the code that runs its operation.
#ifndef OMNISTAGE_COMMON_TRACING_SPAN_H_
#define OMNISTAGE_COMMON_TRACING_SPAN_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/tracing/trace_context.h"

namespace omnistage {

class Span {
 public:
  enum class Kind { kInternal, kServer, kClient };

  // Not started: records nothing, has no context.
  Span() = default;
  // A span with `context` (its own span id); `parent_span_id` empty for a
  // trace's root. Records when the context is sampled, unless not `record`
  // (its context is still passed on as it is).
  Span(absl::string_view name, Kind kind, TraceContext context, std::string parent_span_id,
       absl::Time start, bool record = true);

  // Attributes: a key set again takes the new value.
  bool started() const { return !context_.trace_id.empty(); }
  bool recording() const { return recording_; }
  const TraceContext& context() const { return context_; }

  void Set(absl::string_view key, absl::string_view value);
  void Set(absl::string_view key, const char* value) { Set(key, absl::string_view(value)); }
  void Set(absl::string_view key, int64_t value);
  void Set(absl::string_view key, int value) { Set(key, static_cast<int64_t>(value)); }
  void Set(absl::string_view key, double value);
  void Set(absl::string_view key, bool value);
  // A timed event, with one optional string attribute.
  void Event(absl::string_view name, absl::Time at, absl::string_view key = "",
             absl::string_view value = "");
  // The operation failed: the span's status is an error with `message`.
  void Error(absl::string_view message);

  // Ends it at `end`: the span's record, an encoded
  // opentelemetry.proto.trace.v1.Span (empty when not recording). Later
  // calls record nothing.
  std::string End(absl::Time end);

 private:
  // Where an attribute's KeyValue lies in record_, and its key within it.
  struct Attribute {
    size_t begin = 0;
    size_t size = 0;
    size_t key_begin = 0;
    size_t key_size = 0;
  };
  // Drops the attribute `key` set before, if any (a key set again takes the
  // new value), then starts its KeyValue with a value of `value_size`
  // bytes (the AnyValue's encoding); the caller appends the value.
  void BeginAttribute(absl::string_view key, size_t value_size);

  TraceContext context_;
  bool recording_ = false;
  std::string record_;
  std::vector<Attribute> attributes_;
};

// Unix nanoseconds, as OTLP carries times.
uint64_t UnixNanos(absl::Time t);

}  // namespace omnistage

#endif  // OMNISTAGE_COMMON_TRACING_SPAN_H_
