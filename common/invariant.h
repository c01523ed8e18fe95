// Invariants: conditions the code guarantees to itself, checked Envoy style.
//
// A broken invariant is a bug in omnistage, never something a client or the
// environment can cause (those get a Status). In debug builds (no NDEBUG: Bazel's
// default fastbuild, so every test and fuzzer) it crashes at once with the file,
// line, condition and message. In optimized builds (-c opt) it is logged as an
// error line through the logger (JSON when asked), counted
// (omnistage_invariant_violations_total, PipelineStatus.invariant_violations),
// and the caller fails what it concerns, so a serving process keeps serving.
//
//   OMNISTAGE_INVARIANT(scheduler_->InLoop(), "called off the loop");
//   if (!OMNISTAGE_INVARIANT_HOLDS(fresh, LogContext{id}, "admitted twice")) {
//     return Fail(id);  // only in optimized builds: debug builds crashed
//   }
#ifndef OMNISTAGE_COMMON_INVARIANT_H_
#define OMNISTAGE_COMMON_INVARIANT_H_

#include <cstdint>

#include "absl/strings/string_view.h"
#include "common/log.h"
#include "common/metrics.h"

namespace omnistage {

// What a broken invariant does: kCrash (the default without NDEBUG) or kReport
// (the default with it: log, count, carry on). Tests of the optimized path set
// kReport; call before other threads run.
enum class InvariantMode { kCrash, kReport };
void SetInvariantMode(InvariantMode mode);

// Reports a broken invariant about `context` (its request, stage and replica
// name the line); returns false in kReport mode, does not return in kCrash.
bool InvariantBroken(const char* file, int line, const char* condition,
                     const LogContext& context, absl::string_view message);

// Broken invariants counted since the process started.
uint64_t InvariantViolations();

// Adds omnistage_invariant_violations_total to `registry` (read at each scrape).
void AddInvariantMetric(MetricsRegistry* registry);

}  // namespace omnistage

// A statement: reports a broken invariant that concerns nothing to fail.
#define OMNISTAGE_INVARIANT(condition, message)                                        \
  do {                                                                                 \
    if (!(condition)) {                                                                \
      (void)::omnistage::InvariantBroken(__FILE__, __LINE__, #condition,              \
                                         ::omnistage::LogContext(), (message));        \
    }                                                                                  \
  } while (false)

// An expression: true when `condition` holds; otherwise reports it about
// `context` and is false (optimized builds), so the caller can fail it.
#define OMNISTAGE_INVARIANT_HOLDS(condition, context, message)                         \
  (static_cast<bool>(condition) ||                                                     \
   ::omnistage::InvariantBroken(__FILE__, __LINE__, #condition, (context), (message)))

#endif  // OMNISTAGE_COMMON_INVARIANT_H_
