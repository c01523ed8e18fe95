#include "common/tracing/span.h"

#include <utility>

#include "common/tracing/otlp_wire.h"

namespace omnistage {
namespace {

// Field numbers of opentelemetry.proto.trace.v1.Span (protos/otlp/trace.proto).
enum SpanField {
  kTraceId = 1,
  kSpanId = 2,
  kTraceState = 3,
  kParentSpanId = 4,
  kName = 5,
  kKind = 6,
  kStartTime = 7,
  kEndTime = 8,
  kAttributes = 9,
  kEvents = 11,
  kStatus = 15,
  kFlags = 16,
};
// Span.Event, Status, KeyValue and AnyValue.
enum { kEventTime = 1, kEventName = 2, kEventAttributes = 3 };
enum { kStatusMessage = 2, kStatusCode = 3 };
enum { kKey = 1, kValue = 2 };
enum { kStringValue = 1, kBoolValue = 2, kIntValue = 3, kDoubleValue = 4 };
// Span.SpanKind and Status.StatusCode.
enum { kSpanKindInternal = 1, kSpanKindServer = 2, kSpanKindClient = 3 };
constexpr int kStatusCodeError = 2;

// What a span usually takes: enough that most never grow their string.
constexpr size_t kRecordReserve = 512;

int KindOf(Span::Kind kind) {
  switch (kind) {
    case Span::Kind::kServer:
      return kSpanKindServer;
    case Span::Kind::kClient:
      return kSpanKindClient;
    case Span::Kind::kInternal:
      break;
  }
  return kSpanKindInternal;
}

// A KeyValue of `key` and a string value, as a whole.
size_t StringKeyValueSize(absl::string_view key, absl::string_view value) {
  return BytesFieldSize(key.size()) + BytesFieldSize(BytesFieldSize(value.size()));
}

void AppendStringKeyValue(std::string* out, absl::string_view key, absl::string_view value) {
  AppendBytesField(out, kKey, key);
  AppendLengthPrefix(out, kValue, BytesFieldSize(value.size()));
  AppendBytesField(out, kStringValue, value);
}

}  // namespace

uint64_t UnixNanos(absl::Time t) {
  const int64_t nanos = absl::ToUnixNanos(t);
  return nanos > 0 ? static_cast<uint64_t>(nanos) : 0;
}

Span::Span(absl::string_view name, Kind kind, TraceContext context, std::string parent_span_id,
           absl::Time start, bool record)
    : context_(std::move(context)) {
  if (!context_.sampled() || !record) return;
  recording_ = true;
  record_.reserve(kRecordReserve);
  AppendBytesField(&record_, kTraceId, context_.trace_id);
  AppendBytesField(&record_, kSpanId, context_.span_id);
  if (!context_.trace_state.empty()) AppendBytesField(&record_, kTraceState, context_.trace_state);
  if (!parent_span_id.empty()) AppendBytesField(&record_, kParentSpanId, parent_span_id);
  AppendFixed32Field(&record_, kFlags, context_.flags);
  AppendBytesField(&record_, kName, name);
  AppendVarintField(&record_, kKind, static_cast<uint64_t>(KindOf(kind)));
  AppendFixed64Field(&record_, kStartTime, UnixNanos(start));
}

void Span::BeginAttribute(absl::string_view key, size_t value_size) {
  for (size_t i = 0; i < attributes_.size(); ++i) {
    const Attribute old = attributes_[i];
    if (absl::string_view(record_).substr(old.key_begin, old.key_size) != key) continue;
    record_.erase(old.begin, old.size);
    attributes_.erase(attributes_.begin() + static_cast<ptrdiff_t>(i));
    for (Attribute& later : attributes_) {
      if (later.begin > old.begin) {
        later.begin -= old.size;
        later.key_begin -= old.size;
      }
    }
    break;
  }
  Attribute attribute;
  attribute.begin = record_.size();
  const size_t key_value_size = BytesFieldSize(key.size()) + BytesFieldSize(value_size);
  AppendLengthPrefix(&record_, kAttributes, key_value_size);
  AppendLengthPrefix(&record_, kKey, key.size());
  attribute.key_begin = record_.size();
  attribute.key_size = key.size();
  record_.append(key.data(), key.size());
  AppendLengthPrefix(&record_, kValue, value_size);
  // The caller appends the value's value_size bytes.
  attribute.size = record_.size() + value_size - attribute.begin;
  attributes_.push_back(attribute);
}

void Span::Set(absl::string_view key, absl::string_view value) {
  if (!recording_) return;
  BeginAttribute(key, BytesFieldSize(value.size()));
  AppendBytesField(&record_, kStringValue, value);
}

void Span::Set(absl::string_view key, int64_t value) {
  if (!recording_) return;
  const uint64_t bits = static_cast<uint64_t>(value);
  BeginAttribute(key, 1 + VarintSize(bits));
  AppendVarintField(&record_, kIntValue, bits);
}

void Span::Set(absl::string_view key, double value) {
  if (!recording_) return;
  BeginAttribute(key, 1 + 8);
  AppendDoubleField(&record_, kDoubleValue, value);
}

void Span::Set(absl::string_view key, bool value) {
  if (!recording_) return;
  BeginAttribute(key, 1 + 1);
  AppendVarintField(&record_, kBoolValue, value ? 1 : 0);
}

void Span::Event(absl::string_view name, absl::Time at, absl::string_view key,
                 absl::string_view value) {
  if (!recording_) return;
  size_t size = 1 + 8 + BytesFieldSize(name.size());
  if (!key.empty()) size += BytesFieldSize(StringKeyValueSize(key, value));
  AppendLengthPrefix(&record_, kEvents, size);
  AppendFixed64Field(&record_, kEventTime, UnixNanos(at));
  AppendBytesField(&record_, kEventName, name);
  if (!key.empty()) {
    AppendLengthPrefix(&record_, kEventAttributes, StringKeyValueSize(key, value));
    AppendStringKeyValue(&record_, key, value);
  }
}

void Span::Error(absl::string_view message) {
  if (!recording_) return;
  // A later status replaces an earlier one field by field: both are set.
  AppendLengthPrefix(&record_, kStatus, BytesFieldSize(message.size()) + 2);
  AppendBytesField(&record_, kStatusMessage, message);
  AppendVarintField(&record_, kStatusCode, kStatusCodeError);
}

std::string Span::End(absl::Time end) {
  if (!recording_) return {};
  AppendFixed64Field(&record_, kEndTime, UnixNanos(end));
  recording_ = false;
  attributes_.clear();
  return std::move(record_);
}

}  // namespace omnistage
