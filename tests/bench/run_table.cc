#include "tests/bench/run_table.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "tests/bench/bench_processes.h"

namespace omnistage {
namespace bench {
namespace {

// Counts and large figures whole, the rest to two decimals; "-" for none.
std::string Number(double value) {
  if (std::isnan(value)) return "-";
  const bool whole = value == std::floor(value) || std::fabs(value) >= 100;
  return absl::StrFormat("%.*f", whole ? 0 : 2, value);
}

std::string Json(const std::string& text) {
  std::string out = "\"";
  for (const char c : text) {
    if (static_cast<unsigned char>(c) < 0x20) {
      absl::StrAppend(&out, absl::StrFormat("\\u%04x", c));
    } else {
      absl::StrAppend(&out, c == '"' || c == '\\' ? "\\" : "", std::string(1, c));
    }
  }
  return out + "\"";
}

// What the watchdog writes, made before it is armed: a signal handler may
// only write(2) what is already there.
char give_up_message[256];
size_t give_up_size = 0;

void GiveUp(int) {
  const ssize_t ignored = write(STDERR_FILENO, give_up_message, give_up_size);
  (void)ignored;
  _exit(3);
}

}  // namespace

void Table::Add(const std::string& label, int run, std::vector<double> values) {
  auto it = std::find_if(rows.begin(), rows.end(), [&](const Row& r) { return r.label == label; });
  Row& row = it != rows.end() ? *it : rows.emplace_back(Row{label, {}});
  if (static_cast<int>(row.runs.size()) <= run) row.runs.resize(run + 1);
  row.runs[run] = std::move(values);
}

std::string FormatTable(const Table& table) {
  // Cells first, then each column as wide as its widest cell.
  std::vector<std::vector<std::string>> lines = {{"row", "run"}};
  lines[0].insert(lines[0].end(), table.columns.begin(), table.columns.end());
  for (const Table::Row& row : table.rows) {
    std::vector<double> low(table.columns.size(), kNone), high = low;
    for (size_t r = 0; r < row.runs.size(); ++r) {
      lines.push_back({r == 0 ? row.label : "", absl::StrCat(r + 1)});
      for (size_t c = 0; c < row.runs[r].size(); ++c) {
        const double v = row.runs[r][c];
        lines.back().push_back(Number(v));
        if (std::isnan(v)) continue;
        low[c] = std::isnan(low[c]) ? v : std::min(low[c], v);
        high[c] = std::isnan(high[c]) ? v : std::max(high[c], v);
      }
    }
    lines.push_back({row.runs.empty() ? row.label : "", "min..max"});
    for (size_t c = 0; c < table.columns.size(); ++c) {
      lines.back().push_back(
          std::isnan(low[c]) ? "-" : absl::StrCat(Number(low[c]), "..", Number(high[c])));
    }
  }
  std::vector<size_t> width(lines[0].size(), 0);
  for (const auto& line : lines) {
    for (size_t c = 0; c < line.size(); ++c) width[c] = std::max(width[c], line[c].size());
  }
  std::string text = absl::StrCat("\n", table.title, "\n");
  for (const auto& line : lines) {
    for (size_t c = 0; c < line.size(); ++c) {
      const std::string pad(width[c] - line[c].size(), ' ');
      absl::StrAppend(&text, c == 0 ? "" : "  ", c < 2 ? line[c] + pad : pad + line[c]);
    }
    absl::StrAppend(&text, "\n");
  }
  for (const std::string& e : table.errors) absl::StrAppend(&text, "  error: ", e, "\n");
  return text;
}

std::string JsonTables(const std::string& header, const std::vector<Table>& tables) {
  std::vector<std::string> parts;
  for (const Table& t : tables) {
    std::vector<std::string> columns, rows, errors;
    for (const std::string& column : t.columns) columns.push_back(Json(column));
    for (const Table::Row& row : t.rows) {
      std::vector<std::string> runs;
      for (const std::vector<double>& values : row.runs) {
        std::vector<std::string> cells;
        for (double v : values) cells.push_back(std::isnan(v) ? "null" : absl::StrCat(v));
        runs.push_back(absl::StrCat("[", absl::StrJoin(cells, ","), "]"));
      }
      rows.push_back(absl::StrCat("{\"label\":", Json(row.label), ",\"runs\":[",
                                  absl::StrJoin(runs, ","), "]}"));
    }
    for (const std::string& e : t.errors) errors.push_back(Json(e));
    parts.push_back(absl::StrCat(
        "{\"title\":", Json(t.title), ",\"columns\":[", absl::StrJoin(columns, ","), "],\"rows\":[",
        absl::StrJoin(rows, ","), "],\"errors\":[", absl::StrJoin(errors, ","), "]}"));
  }
  return absl::StrCat("{\"header\":", Json(header), ",\"tables\":[", absl::StrJoin(parts, ","),
                      "]}\n");
}

std::string LoadAverage() {
  std::ifstream in("/proc/loadavg");
  std::string one, five, fifteen;
  in >> one >> five >> fifteen;
  return absl::StrCat(one, " ", five, " ", fifteen);
}

std::string RunHeader(int argc, char** argv) {
  return absl::StrCat(absl::StrJoin(std::vector<std::string>(argv, argv + argc), " "), "\n",
                      absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::Now(), absl::UTCTimeZone()),
                      ", ", sysconf(_SC_NPROCESSORS_ONLN), " CPUs, loadavg at start ",
                      LoadAverage());
}

int PrintTables(const std::string& program, const std::string& header,
                const std::vector<Table>& tables, const std::string& json_path) {
  std::cout << header << ", at end " << LoadAverage() << "\n";
  for (const Table& t : tables) std::cout << FormatTable(t);
  std::cout << std::flush;
  if (!json_path.empty()) {
    if (absl::Status s = WriteFile(json_path, JsonTables(header, tables)); !s.ok()) {
      std::cerr << program << ": " << s.message() << "\n";
      return 1;
    }
    std::cout << "JSON written to " << json_path << "\n";
  }
  return 0;
}

void StartWatchdog(const std::string& program, int max_seconds) {
  const std::string message =
      absl::StrCat(program, ": still running after --max_seconds; giving up\n");
  give_up_size = std::min(message.size(), sizeof(give_up_message));
  std::memcpy(give_up_message, message.data(), give_up_size);
  signal(SIGALRM, GiveUp);
  alarm(static_cast<unsigned>(max_seconds));
}

}  // namespace bench
}  // namespace omnistage
