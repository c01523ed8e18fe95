// Runs Debian's promtool over a metrics exposition: `promtool check metrics`,
// which fails malformed text and reports what breaks Prometheus' naming
// conventions.
#ifndef OMNISTAGE_COMMON_TESTING_PROMTOOL_H_
#define OMNISTAGE_COMMON_TESTING_PROMTOOL_H_

#include <string>

namespace omnistage {

struct PromtoolResult {
  int exit_code = -1;
  std::string output;
};

// `text` is written to a file in the test's temporary folder and checked.
PromtoolResult PromtoolCheckMetrics(const std::string& text);

}  // namespace omnistage

#endif  // OMNISTAGE_COMMON_TESTING_PROMTOOL_H_
