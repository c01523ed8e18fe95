// The orchestrator's failover counter, omnistage_failovers_total{stage,
// outcome} (docs/reliability.md), and any one sample, read from its /metrics.
// Without gtest, so that the chaos soak and the benchmarks can use it as well
// as the tests.
//
//   absl::StatusOr<int64_t> resumed =
//       FailoverCount(pipeline.orchestrator_metrics_port(), "talker", "resumed");
#ifndef OMNISTAGE_TESTS_FAILOVER_METRICS_H_
#define OMNISTAGE_TESTS_FAILOVER_METRICS_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace omnistage {

// The counter's value for `stage` (a stage name) and `outcome` ("resumed",
// "no_live_replica", ...) in an exposition text; 0 when no such series is
// there (a counter that never moved need not be exported).
int64_t FailoverCountIn(const std::string& exposition, const std::string& stage,
                        const std::string& outcome);
// The same, summed over every stage.
int64_t FailoverCountIn(const std::string& exposition, const std::string& outcome);

// One GET of http://127.0.0.1:`port`/metrics.
absl::StatusOr<std::string> ScrapeMetrics(int port);

// The value of the sample named exactly `series` (its labels included, as
// printed) in an exposition text; 0 when there is none.
double SampleIn(const std::string& exposition, const std::string& series);

// FailoverCountIn of one scrape.
absl::StatusOr<int64_t> FailoverCount(int port, const std::string& stage,
                                      const std::string& outcome);

}  // namespace omnistage

#endif  // OMNISTAGE_TESTS_FAILOVER_METRICS_H_
