#include "common/tracing/trace_metrics.h"

#include <memory>

#include "absl/synchronization/mutex.h"

namespace omnistage {

void AddTraceMetrics(MetricsRegistry* registry, const Tracer* tracer) {
  if (tracer == nullptr || !tracer->enabled()) return;
  Family<Counter>& spans = registry->AddCounter(
      "omnistage_trace_spans_total",
      "Spans handed to the OTLP exporter, by outcome: exported (the collector took them) or "
      "dropped (a full queue, a collector down past the retries, or one that refused them).",
      {"outcome"});
  Counter* exported = &spans.With({"exported"});
  Counter* dropped = &spans.With({"dropped"});
  // What the counters were last brought up to: scrapes may overlap.
  struct Seen {
    absl::Mutex mu;
    int64_t exported = 0;
    int64_t dropped = 0;
  };
  auto seen = std::make_shared<Seen>();
  const OtlpExporter* exporter = tracer->exporter();
  registry->OnRender([exporter, exported, dropped, seen] {
    absl::MutexLock lock(&seen->mu);
    const int64_t now_exported = exporter->exported();
    const int64_t now_dropped = exporter->dropped();
    exported->Increment(static_cast<double>(now_exported - seen->exported));
    dropped->Increment(static_cast<double>(now_dropped - seen->dropped));
    seen->exported = now_exported;
    seen->dropped = now_dropped;
  });
}

}  // namespace omnistage
