// Invariants: conditions the code guarantees to itself, checked Envoy style.
//
// A broken invariant is a bug in omnistage, never something a client or the
// environment can cause (those get a Status). In debug builds (no NDEBUG: Bazel's
// default fastbuild, and every test) it crashes at once with the file, line,
// condition and message; in optimized builds (-c opt) it logs one line and is
// counted, so a serving process keeps serving and the count shows in status.
//
//   OMNISTAGE_INVARIANT(table_.Find(id) == nullptr, "a request id is admitted twice");
#ifndef OMNISTAGE_COMMON_INVARIANT_H_
#define OMNISTAGE_COMMON_INVARIANT_H_

#include <cstdint>

#include "absl/strings/string_view.h"

namespace omnistage {

// Reports a broken invariant: aborts in debug builds, logs and counts otherwise.
void InvariantViolated(const char* file, int line, const char* condition,
                       absl::string_view message);

// Broken invariants counted since the process started (always 0 in debug builds,
// which crash instead).
uint64_t InvariantViolations();

}  // namespace omnistage

#define OMNISTAGE_INVARIANT(condition, message)                                        \
  do {                                                                                 \
    if (!(condition)) {                                                                \
      ::omnistage::InvariantViolated(__FILE__, __LINE__, #condition, (message));       \
    }                                                                                  \
  } while (false)

#endif  // OMNISTAGE_COMMON_INVARIANT_H_
