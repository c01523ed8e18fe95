// The figures tables of //tests/bench:peers_benchmark and
// //tests/bench:gateway_benchmark: each row holds one value per column for each
// run, printed per run and as the spread (min..max) over the runs under a
// header (command line, time, CPUs, loadavg) and written as JSON; also the
// --max_seconds watchdog both programs arm. No targets, no verdicts.
//
//   const std::string header = RunHeader(argc, argv);  // Before the runs.
//   Table pick("pick: 3 peers x 4 streams", {"TTFT p99 ms", "p99 x rr"});
//   pick.Add("round_robin", /*run=*/0, {158, kNone});  // kNone prints as "-".
//   pick.errors.push_back("run 2: the workers did not start");
//   return PrintTables("peers_benchmark", header, {pick}, /*json_path=*/"");
#ifndef OMNISTAGE_TESTS_BENCH_RUN_TABLE_H_
#define OMNISTAGE_TESTS_BENCH_RUN_TABLE_H_

#include <limits>
#include <string>
#include <utility>
#include <vector>

namespace omnistage {
namespace bench {

// A figure there is none of (a run that measured nothing for that column):
// "-" in the text, null in the JSON, and left out of min..max.
inline constexpr double kNone = std::numeric_limits<double>::quiet_NaN();

// Figures by run: each row holds one value per column for each run.
struct Table {
  struct Row {
    std::string label;
    std::vector<std::vector<double>> runs;  // Empty for a run that failed.
  };
  Table(std::string title, std::vector<std::string> columns)
      : title(std::move(title)), columns(std::move(columns)) {}

  // Sets the values of run `run` (from 0) of the row `label`, which is added
  // after the others if it is new.
  void Add(const std::string& label, int run, std::vector<double> values);

  std::string title;
  std::vector<std::string> columns;
  std::vector<Row> rows;
  std::vector<std::string> errors;  // Printed under the table, one a line.
};

// The title, then a line per run of each row and its min..max, each column as
// wide as its widest cell: counts and large figures whole, the rest to two
// decimals. Starts with an empty line; ends with the errors.
std::string FormatTable(const Table& table);

// {"header": ..., "tables": [{"title", "columns", "rows": [{"label", "runs"}],
// "errors"}]} and a newline; kNone as null.
std::string JsonTables(const std::string& header, const std::vector<Table>& tables);

// The first three fields of /proc/loadavg ("0.31 1.52 2.04").
std::string LoadAverage();

// Two lines, no newline at the end: the command line, then the UTC time, the
// CPUs online and "loadavg at start " LoadAverage().
std::string RunHeader(int argc, char** argv);

// Prints `header` with ", at end " LoadAverage(), then each table (FormatTable)
// to stdout, and when `json_path` is not empty writes JsonTables there. 0, or
// 1 (said on stderr after "<program>: ") when the JSON could not be written:
// the program's exit status.
int PrintTables(const std::string& program, const std::string& header,
                const std::vector<Table>& tables, const std::string& json_path);

// Past `max_seconds` (SIGALRM), writes "<program>: still running after
// --max_seconds; giving up" to stderr and exits 3; the children die with the
// process. Call it once, early in main.
void StartWatchdog(const std::string& program, int max_seconds);

}  // namespace bench
}  // namespace omnistage

#endif  // OMNISTAGE_TESTS_BENCH_RUN_TABLE_H_
