#include "common/invariant.h"

#include <atomic>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

namespace omnistage {
namespace {

std::atomic<uint64_t> violations{0};
#ifdef NDEBUG
std::atomic<InvariantMode> mode{InvariantMode::kReport};
#else
std::atomic<InvariantMode> mode{InvariantMode::kCrash};
#endif

}  // namespace

void SetInvariantMode(InvariantMode new_mode) { mode.store(new_mode); }

bool InvariantBroken(const char* file, int line, const char* condition,
                     const LogContext& context, absl::string_view message) {
  violations.fetch_add(1, std::memory_order_relaxed);
  LogError(context, absl::StrCat("broken invariant at ", file, ":", line, ": ", message, " (",
                                 condition, ")"));
  if (mode.load() == InvariantMode::kCrash) std::abort();
  return false;
}

uint64_t InvariantViolations() { return violations.load(std::memory_order_relaxed); }

void AddInvariantMetric(MetricsRegistry* registry) {
  Counter& counter = registry
                         ->AddCounter("omnistage_invariant_violations_total",
                                      "Broken internal invariants (bugs of omnistage) since the "
                                      "process started; each was logged as an error.")
                         .With({});
  // The process-wide count, brought into this registry's counter at each scrape
  // (renders may run at once: one at a time adds the difference).
  auto mu = std::make_shared<absl::Mutex>();
  registry->OnRender([&counter, mu] {
    absl::MutexLock lock(mu.get());
    const double now = static_cast<double>(InvariantViolations());
    if (now > counter.value()) counter.Increment(now - counter.value());
  });
}

}  // namespace omnistage
