#include "common/tracing/tracer.h"

#include <utility>

namespace omnistage {

Tracer::Tracer() : sampler_(*Sampler::Parse("always_off", "")) {}

Tracer::Tracer(Sampler sampler, std::unique_ptr<OtlpExporter> exporter)
    : sampler_(std::move(sampler)), exporter_(std::move(exporter)) {}

Span Tracer::Start(absl::string_view name, Span::Kind kind, const TraceContext* parent,
                   absl::Time start) const {
  if (!enabled()) return Span();
  TraceContext context;
  std::string parent_span_id;
  if (parent != nullptr) {
    context = parent->Child();
    parent_span_id = parent->span_id;
  } else {
    context = TraceContext::NewRoot(0);
  }
  const bool sampled = sampler_.Sample(parent, context.trace_id);
  context.flags = static_cast<uint8_t>(sampled ? (context.flags | TraceContext::kSampled)
                                               : (context.flags & ~TraceContext::kSampled));
  // Sampled, but its record would be dropped: not recorded, and counted.
  const bool record = !sampled || !exporter_->full();
  if (!record) exporter_->NotRecorded();
  return Span(name, kind, std::move(context), std::move(parent_span_id), start, record);
}

void Tracer::End(Span& span, absl::Time end) const {
  std::string ended = span.End(end);
  span = Span();
  if (!ended.empty() && exporter_ != nullptr) exporter_->Export(std::move(ended));
}

}  // namespace omnistage
