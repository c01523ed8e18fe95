#include "common/invariant.h"

#include <atomic>
#include <cstdlib>
#include <iostream>

namespace omnistage {
namespace {

std::atomic<uint64_t> violations{0};

}  // namespace

void InvariantViolated(const char* file, int line, const char* condition,
                       absl::string_view message) {
  std::cerr << "omnistage: broken invariant at " << file << ":" << line << ": " << message
            << " (" << condition << ")" << std::endl;
#ifndef NDEBUG
  std::abort();
#else
  violations.fetch_add(1, std::memory_order_relaxed);
#endif
}

uint64_t InvariantViolations() { return violations.load(std::memory_order_relaxed); }

}  // namespace omnistage
