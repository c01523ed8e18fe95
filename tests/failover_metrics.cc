#include "tests/failover_metrics.h"

#include <cstdlib>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "httplib.h"

namespace omnistage {
namespace {

constexpr char kCounter[] = "omnistage_failovers_total{";

// Sums the series of the counter whose labels include every one of `labels`
// (`name="value"`), whatever their order.
int64_t Sum(const std::string& exposition, const std::vector<std::string>& labels) {
  int64_t total = 0;
  for (absl::string_view line : absl::StrSplit(exposition, '\n')) {
    if (!absl::StartsWith(line, kCounter)) continue;
    const size_t close = line.rfind('}');
    if (close == absl::string_view::npos) continue;
    const absl::string_view label_text = line.substr(0, close);
    bool match = true;
    for (const std::string& label : labels) {
      // A label is preceded by '{' or ',' so that stage="a" does not match stage="ba".
      match = match && (absl::StrContains(label_text, absl::StrCat("{", label)) ||
                        absl::StrContains(label_text, absl::StrCat(",", label)));
    }
    if (!match) continue;
    double value = 0;
    if (absl::SimpleAtod(absl::StripAsciiWhitespace(line.substr(close + 1)), &value)) {
      total += static_cast<int64_t>(value);
    }
  }
  return total;
}

}  // namespace

int64_t FailoverCountIn(const std::string& exposition, const std::string& stage,
                        const std::string& outcome) {
  return Sum(exposition, {absl::StrCat("stage=\"", stage, "\""),
                          absl::StrCat("outcome=\"", outcome, "\"")});
}

int64_t FailoverCountIn(const std::string& exposition, const std::string& outcome) {
  return Sum(exposition, {absl::StrCat("outcome=\"", outcome, "\"")});
}

absl::StatusOr<std::string> ScrapeMetrics(int port) {
  if (port <= 0) return absl::FailedPreconditionError("no metrics port");
  httplib::Client client("127.0.0.1", port);
  httplib::Result result = client.Get("/metrics");
  if (!result) return absl::UnavailableError(absl::StrCat("no answer on port ", port));
  if (result->status != 200) {
    return absl::UnavailableError(absl::StrCat("/metrics answered ", result->status));
  }
  return result->body;
}

double SampleIn(const std::string& exposition, const std::string& series) {
  const std::string line = series + " ";
  for (size_t at = exposition.find(line); at != std::string::npos;
       at = exposition.find(line, at + 1)) {
    if (at == 0 || exposition[at - 1] == '\n') {
      return std::strtod(exposition.c_str() + at + line.size(), nullptr);
    }
  }
  return 0;
}

absl::StatusOr<int64_t> FailoverCount(int port, const std::string& stage,
                                      const std::string& outcome) {
  absl::StatusOr<std::string> exposition = ScrapeMetrics(port);
  if (!exposition.ok()) return exposition.status();
  return FailoverCountIn(*exposition, stage, outcome);
}

}  // namespace omnistage
