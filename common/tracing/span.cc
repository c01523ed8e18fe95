#include "common/tracing/span.h"

#include <utility>

namespace omnistage {
namespace {

using Proto = opentelemetry::proto::trace::v1::Span;

Proto::SpanKind KindOf(Span::Kind kind) {
  switch (kind) {
    case Span::Kind::kServer:
      return Proto::SPAN_KIND_SERVER;
    case Span::Kind::kClient:
      return Proto::SPAN_KIND_CLIENT;
    case Span::Kind::kInternal:
      break;
  }
  return Proto::SPAN_KIND_INTERNAL;
}

// The value of attribute `key`, replacing one set before (keys are unique).
opentelemetry::proto::common::v1::AnyValue* Add(Proto* proto, absl::string_view key) {
  for (auto& attribute : *proto->mutable_attributes()) {
    if (attribute.key() == key) return attribute.mutable_value();
  }
  auto* attribute = proto->add_attributes();
  attribute->set_key(std::string(key));
  return attribute->mutable_value();
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
  proto_ = std::make_unique<Proto>();
  proto_->set_trace_id(context_.trace_id);
  proto_->set_span_id(context_.span_id);
  proto_->set_parent_span_id(std::move(parent_span_id));
  proto_->set_trace_state(context_.trace_state);
  proto_->set_flags(context_.flags);
  proto_->set_name(std::string(name));
  proto_->set_kind(KindOf(kind));
  proto_->set_start_time_unix_nano(UnixNanos(start));
}

void Span::Set(absl::string_view key, absl::string_view value) {
  if (proto_ != nullptr) Add(proto_.get(), key)->set_string_value(std::string(value));
}

void Span::Set(absl::string_view key, int64_t value) {
  if (proto_ != nullptr) Add(proto_.get(), key)->set_int_value(value);
}

void Span::Set(absl::string_view key, double value) {
  if (proto_ != nullptr) Add(proto_.get(), key)->set_double_value(value);
}

void Span::Set(absl::string_view key, bool value) {
  if (proto_ != nullptr) Add(proto_.get(), key)->set_bool_value(value);
}

void Span::Event(absl::string_view name, absl::Time at, absl::string_view key,
                 absl::string_view value) {
  if (proto_ == nullptr) return;
  auto* event = proto_->add_events();
  event->set_time_unix_nano(UnixNanos(at));
  event->set_name(std::string(name));
  if (!key.empty()) {
    auto* attribute = event->add_attributes();
    attribute->set_key(std::string(key));
    attribute->mutable_value()->set_string_value(std::string(value));
  }
}

void Span::Error(absl::string_view message) {
  if (proto_ == nullptr) return;
  proto_->mutable_status()->set_code(opentelemetry::proto::trace::v1::Status::STATUS_CODE_ERROR);
  proto_->mutable_status()->set_message(std::string(message));
}

std::unique_ptr<Proto> Span::End(absl::Time end) {
  if (proto_ != nullptr) proto_->set_end_time_unix_nano(UnixNanos(end));
  return std::move(proto_);
}

}  // namespace omnistage
