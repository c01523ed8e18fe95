// Tracer: a process's spans (docs/observability.md, "Traces"): which are
// sampled (Sampler) and where the ended ones go (OtlpExporter). A tracer
// without an exporter is off: its spans are not started, and cost nothing.
//
//   Tracer tracer(*Sampler::Parse("", ""), std::move(exporter));
//   Span span = tracer.Start("Generate", Span::Kind::kServer, parent_or_null, absl::Now());
//   ...
//   tracer.End(span, absl::Now());
//
// Thread-safe.
#ifndef OMNISTAGE_COMMON_TRACING_TRACER_H_
#define OMNISTAGE_COMMON_TRACING_TRACER_H_

#include <memory>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/tracing/otlp_exporter.h"
#include "common/tracing/sampler.h"
#include "common/tracing/span.h"

namespace omnistage {

class Tracer {
 public:
  // Off.
  Tracer();
  Tracer(Sampler sampler, std::unique_ptr<OtlpExporter> exporter);

  bool enabled() const { return exporter_ != nullptr; }
  // A span in `parent`'s trace (the caller's, from its traceparent, or a
  // span of this process), or the root of a new trace (null). Not started
  // when the tracer is off; not recording (a dropped span, counted) while
  // the exporter's queue is full.
  Span Start(absl::string_view name, Span::Kind kind, const TraceContext* parent,
             absl::Time start) const;
  // Ends `span` at `end` and hands it to the exporter, if it records;
  // `span` is left not started (its context went with it).
  void End(Span& span, absl::Time end) const;
  // Null when off.
  OtlpExporter* exporter() const { return exporter_.get(); }

 private:
  Sampler sampler_;
  std::unique_ptr<OtlpExporter> exporter_;
};

}  // namespace omnistage

#endif  // OMNISTAGE_COMMON_TRACING_TRACER_H_
