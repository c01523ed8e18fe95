// The export's counts on a process's /metrics (docs/observability.md,
// "Traces"): omnistage_trace_spans_total{outcome="exported"|"dropped"},
// read from the tracer's exporter at each scrape.
//
//   AddTraceMetrics(&registry, tracer.get());
#ifndef OMNISTAGE_COMMON_TRACING_TRACE_METRICS_H_
#define OMNISTAGE_COMMON_TRACING_TRACE_METRICS_H_

#include "common/metrics.h"
#include "common/tracing/tracer.h"

namespace omnistage {

// Nothing when `tracer` is null or off. `tracer` outlives `registry`'s
// scrapes.
void AddTraceMetrics(MetricsRegistry* registry, const Tracer* tracer);

}  // namespace omnistage

#endif  // OMNISTAGE_COMMON_TRACING_TRACE_METRICS_H_
