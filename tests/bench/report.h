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
  std::vector<RequestCell> requests;
};

// The tables and target verdicts, as printed.
std::string FormatReport(const Report& report);
std::string JsonReport(const Report& report);

// ---- The report's parts (report.cc, request_report.cc) -----------------------------

// The requests tables ("## Requests: ..."), one per count of outputs, adding
// their target verdicts to `verdicts`; empty without cells.
std::string FormatRequests(const Report& report, std::vector<std::string>* verdicts);
// The "requests" member of the JSON object: `"requests": {...}`.
std::string RequestsJson(const Report& report);

namespace report_text {
std::string Verdict(bool met);            // "MET   " or "MISSED".
std::string Ratio(double r);              // Two decimals; "-" when r <= 0.
std::string Quote(const std::string& s);  // A JSON string.
std::string Num(double v);                // A JSON number (3 decimals) or null.
}  // namespace report_text

}  // namespace bench
}  // namespace omnistage

#endif  // OMNISTAGE_TESTS_BENCH_REPORT_H_
