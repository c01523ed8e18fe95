// The requests scenario's part of the report: a table per count of outputs,
// its target verdicts, and its JSON.
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "tests/bench/report.h"

namespace omnistage {
namespace bench {
namespace {

using report_text::Num;
using report_text::Quote;
using report_text::Ratio;
using report_text::Verdict;

// The targets of a request's cost (docs/benchmarks.md, "The cost of a request").
constexpr double kMinRequestRatio = 0.8;
constexpr double kMaxOrchestratorCpuUsPerRequest = 20;
constexpr double kMaxGatewayCpuUsPerRequest = 150;

const RequestCell* FindRequestCell(const std::vector<RequestCell>& cells, const std::string& row,
                                   int outputs) {
  for (const RequestCell& c : cells) {
    if (c.row == row && c.outputs == outputs && c.requests > 0 && c.failed == 0) return &c;
  }
  return nullptr;
}

std::string Plural(int n, const std::string& one, const std::string& many) {
  return absl::StrCat(n, " ", n == 1 ? one : many);
}

// The traced rows against orch1 in the same run: the orchestrator's and the
// workers' CPU per request, TTFT p99, and the orchestrator's spans per request.
std::string FormatTracingCost(const std::vector<RequestCell>& cells) {
  std::string out;
  for (const RequestCell& c : cells) {
    if (c.spans_exported_per_request < 0) continue;
    const RequestCell* off = FindRequestCell(cells, "orch1", c.outputs);
    if (off == nullptr || off->front_cpu_us_per_request <= 0 || off->ttft_p99_us <= 0) continue;
    if (out.empty()) {
      absl::StrAppend(
          &out, "\n## Tracing's cost: orch1 traced, against orch1 untraced in this run\n",
          "x off: the figure over orch1's; spans/rq, drop/rq: the orchestrator's spans exported "
          "and dropped per request\n",
          absl::StrFormat("%-10s %7s %8s %6s %8s %6s %9s %6s %8s %8s\n", "row", "outputs",
                          "front/rq", "x off", "back/rq", "x off", "TTFT p99", "x off", "spans/rq",
                          "drop/rq"));
    }
    absl::StrAppend(
        &out, absl::StrFormat("%-10s %7d %8.1f %6.2f %8.1f %6.2f %9.0f %6.2f %8.2f %8.2f\n", c.row,
                              c.outputs, c.front_cpu_us_per_request,
                              c.front_cpu_us_per_request / off->front_cpu_us_per_request,
                              c.back_cpu_us_per_request,
                              off->back_cpu_us_per_request > 0
                                  ? c.back_cpu_us_per_request / off->back_cpu_us_per_request
                                  : 0,
                              c.ttft_p99_us, c.ttft_p99_us / off->ttft_p99_us,
                              c.spans_exported_per_request, c.spans_dropped_per_request));
  }
  return out;
}

}  // namespace

std::string FormatRequests(const Report& report, std::vector<std::string>* verdicts) {
  std::string out;
  std::set<int> done;
  for (const RequestCell& first : report.requests) {
    if (!done.insert(first.outputs).second) continue;
    absl::StrAppend(
        &out, "\n## Requests: ", Plural(first.outputs, "output", "outputs"), " per request, ",
        Plural(first.streams, "client", "clients"), ", zero step time\n",
        "latencies in us; /rq: per request, CPU in us (schedstat), wk: runs on a CPU\n",
        absl::StrFormat("%-10s %8s %4s %9s %6s %6s %9s %9s %8s %8s %8s %8s %7s\n", "row",
                        "requests", "fail", "req/s", "x base", "x grpc", "TTFT p50", "TTFT p99",
                        "front/rq", "back/rq", "fr wk/rq", "bk wk/rq", "cli/rq"));
    for (const RequestCell& c : report.requests) {
      if (c.outputs != first.outputs) continue;
      if (c.requests == 0) {
        absl::StrAppend(&out, absl::StrFormat("%-10s  skipped: %s\n", c.row, c.error));
        continue;
      }
      absl::StrAppend(
          &out, absl::StrFormat(
                    "%-10s %8d %4d %9.0f %6s %6s %9.0f %9.0f %8.1f %8.1f %8.2f %8.2f %7.1f\n",
                    c.row, c.requests, c.failed, c.requests_per_s, Ratio(c.ratio_to_baseline),
                    Ratio(c.ratio_to_text_grpc), c.ttft_p50_us, c.ttft_p99_us,
                    c.front_cpu_us_per_request, c.back_cpu_us_per_request, c.front_runs_per_request,
                    c.back_runs_per_request, c.client_cpu_us_per_request));
      if (!c.error.empty()) absl::StrAppend(&out, "           ! ", c.error, "\n");
    }
  }
  absl::StrAppend(&out, FormatTracingCost(report.requests));
  const RequestCell* orch = FindRequestCell(report.requests, "orch1", 1);
  if (orch != nullptr && orch->ratio_to_baseline > 0) {
    verdicts->push_back(absl::StrFormat(
        "%s orch1 requests, 1 output, %d clients: %.2fx the baseline's requests/s (target >= "
        "%.1fx)",
        Verdict(orch->ratio_to_baseline >= kMinRequestRatio), orch->streams,
        orch->ratio_to_baseline, kMinRequestRatio));
  }
  if (orch != nullptr) {
    verdicts->push_back(absl::StrFormat(
        "%s orch1 requests, 1 output: the orchestrator's own CPU %.1f us per request (target "
        "<= %.0f)",
        Verdict(orch->front_cpu_us_per_request <= kMaxOrchestratorCpuUsPerRequest),
        orch->front_cpu_us_per_request, kMaxOrchestratorCpuUsPerRequest));
  }
  if (const RequestCell* gateway = FindRequestCell(report.requests, "gateway", 1)) {
    verdicts->push_back(absl::StrFormat(
        "%s gateway requests, 1 output: the gateway's own CPU %.1f us per streamed completion "
        "(target <= %.0f)",
        Verdict(gateway->front_cpu_us_per_request <= kMaxGatewayCpuUsPerRequest),
        gateway->front_cpu_us_per_request, kMaxGatewayCpuUsPerRequest));
  }
  return out;
}

std::string RequestsJson(const Report& report) {
  const BenchOptions& o = report.options;
  std::string out = absl::StrCat("\"requests\": {\"clients\": ", o.request_streams,
                                 ", \"seconds\": ", Num(absl::ToDoubleSeconds(o.request_time)),
                                 ", \"step_time_us\": 0, \"cells\": [");
  for (size_t i = 0; i < report.requests.size(); ++i) {
    const RequestCell& c = report.requests[i];
    absl::StrAppend(
        &out, i == 0 ? "\n" : ",\n", "    {\"row\": ", Quote(c.row), ", \"outputs\": ", c.outputs,
        ", \"clients\": ", c.streams, ", \"requests\": ", c.requests, ", \"failed\": ", c.failed,
        ", \"outputs_counted\": ", c.tokens, ", \"seconds\": ", Num(c.seconds),
        ", \"requests_per_s\": ", Num(c.requests_per_s),
        ", \"ratio_to_baseline\": ", Num(c.ratio_to_baseline),
        ", \"ratio_to_text_grpc\": ", Num(c.ratio_to_text_grpc),
        ", \"front_cpu_us_per_request\": ", Num(c.front_cpu_us_per_request),
        ", \"back_cpu_us_per_request\": ", Num(c.back_cpu_us_per_request),
        ", \"front_runs_per_request\": ", Num(c.front_runs_per_request),
        ", \"back_runs_per_request\": ", Num(c.back_runs_per_request),
        ", \"client_cpu_us_per_request\": ", Num(c.client_cpu_us_per_request),
        ", \"ttft_us\": {\"p50\": ", Num(c.ttft_p50_us), ", \"p99\": ", Num(c.ttft_p99_us), "}");
    if (c.spans_exported_per_request >= 0) {
      absl::StrAppend(&out, ", \"spans_exported_per_request\": ", Num(c.spans_exported_per_request),
                      ", \"spans_dropped_per_request\": ", Num(c.spans_dropped_per_request));
    }
    absl::StrAppend(&out, ", \"error\": ", Quote(c.error), "}");
  }
  absl::StrAppend(&out, "\n  ]}");
  return out;
}

}  // namespace bench
}  // namespace omnistage
