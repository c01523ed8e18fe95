#include "tests/bench/figures.h"

#include <time.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace omnistage {
namespace bench {

std::string Range(const std::vector<double>& values, int decimals) {
  if (values.empty()) return "-";
  const auto [lo, hi] = std::minmax_element(values.begin(), values.end());
  return absl::StrCat(absl::StrFormat("%.*f", decimals, *lo), "..",
                      absl::StrFormat("%.*f", decimals, *hi));
}

double PercentileOf(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  return values[std::min(values.size() - 1, static_cast<size_t>(p * values.size()))];
}

double ThreadCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + ts.tv_nsec / 1e9;
}

}  // namespace bench
}  // namespace omnistage
