// The benchmark's output: readable tables (with each target met or missed) for
// stdout, and the same figures as JSON.
#ifndef OMNISTAGE_TESTS_BENCH_REPORT_H_
#define OMNISTAGE_TESTS_BENCH_REPORT_H_

#include <optional>
#include <string>
#include <vector>

#include "tests/bench/scenarios.h"

namespace omnistage {
namespace bench {

struct Report {
  std::string command;
  std::string date;  // UTC, ISO 8601.
  int cpus = 0;
  // /proc/loadavg at the start and the end: the machine is shared.
  std::string loadavg_start;
  std::string loadavg_end;
  std::string nginx_note;  // Why nginx rows are missing, if they are.
  std::string haproxy_note;  // Why haproxy rows are missing, if they are.
  BenchOptions options;
  std::vector<ThroughputCell> throughput;
  std::optional<LightLoad> light;
  std::vector<AbortFigures> aborts;  // The first at 64 in flight, then 1.
  std::optional<KillFigures> kill;
  std::optional<IdleFigures> idle;
};

// The tables and target verdicts, as printed.
std::string FormatReport(const Report& report);
std::string JsonReport(const Report& report);

}  // namespace bench
}  // namespace omnistage

#endif  // OMNISTAGE_TESTS_BENCH_REPORT_H_
