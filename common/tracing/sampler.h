// Sampler: whether a request's spans are recorded and exported, as
// OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG choose
// (docs/observability.md, "Traces"):
//   always_on, always_off, traceidratio (arg: the ratio, 0..1), and
//   parentbased_always_on (the default), parentbased_always_off,
//   parentbased_traceidratio: these follow the parent's sampled flag when
//   the caller sent a traceparent, and decide by the root sampler otherwise.
// The ratio decision reads only the trace id, so every process of a trace
// decides alike.
//
//   absl::StatusOr<Sampler> sampler = Sampler::Parse("parentbased_traceidratio", "0.01");
//   bool recorded = sampler->Sample(parent.has_value() ? &*parent : nullptr, trace_id);
#ifndef OMNISTAGE_COMMON_TRACING_SAMPLER_H_
#define OMNISTAGE_COMMON_TRACING_SAMPLER_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/tracing/trace_context.h"

namespace omnistage {

class Sampler {
 public:
  // `name` as OTEL_TRACES_SAMPLER spells it (empty: the default), `arg` the
  // ratio for the traceidratio ones (empty: 1). INVALID_ARGUMENT for an
  // unknown name or a ratio outside 0..1.
  static absl::StatusOr<Sampler> Parse(absl::string_view name, absl::string_view arg);

  // Whether a span of trace `trace_id` (16 bytes) with `parent` (null: a new
  // trace) is sampled.
  bool Sample(const TraceContext* parent, absl::string_view trace_id) const;
  // What it is, for the start-up log line ("parentbased_traceidratio 0.01").
  std::string Describe() const;

 private:
  enum class Root { kAlwaysOn, kAlwaysOff, kRatio };
  Sampler(bool parent_based, Root root, double ratio)
      : parent_based_(parent_based), root_(root), ratio_(ratio) {}

  bool parent_based_;
  Root root_;
  double ratio_;
};

}  // namespace omnistage

#endif  // OMNISTAGE_COMMON_TRACING_SAMPLER_H_
