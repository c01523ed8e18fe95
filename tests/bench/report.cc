#include "tests/bench/report.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace omnistage {
namespace bench {

namespace report_text {

std::string Verdict(bool met) { return met ? "MET   " : "MISSED"; }

std::string Ratio(double r) { return r > 0 ? absl::StrFormat("%.2f", r) : "-"; }

std::string Quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += absl::StrFormat("\\u%04x", c);
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string Num(double v) { return std::isfinite(v) ? absl::StrFormat("%.3f", v) : "null"; }

}  // namespace report_text

namespace {

using report_text::Num;
using report_text::Quote;
using report_text::Ratio;
using report_text::Verdict;

// Targets from the issues (docs/benchmarks.md lists them with their figures).
constexpr double kMinRatioAt64 = 1.0;
constexpr double kMinRatioAt1 = 1.0;
constexpr double kMaxAddedTtftP50Us = 150;
constexpr double kMaxAddedOneWayP50Us = 40;
constexpr double kMaxAddedOneWayP99Us = 150;
constexpr double kMaxFrontCpuUsPerTokenAt64 = 1.0;
constexpr double kMaxTtftP99VsBaselineAt4096 = 2.0;
constexpr double kMaxMemoryVsBareGrpc = 1.5;
constexpr double kMaxIdleCpuMsPer10s = 10;
constexpr double kMaxAbortP99Us = 2000;

const LightRow* FindLight(const LightLoad& light, const std::string& row) {
  for (const LightRow& r : light.rows) {
    if (r.row == row && r.figures.requests > 0 && r.figures.failed == 0) return &r;
  }
  return nullptr;
}

const ThroughputCell* FindCell(const std::vector<ThroughputCell>& cells, const std::string& row,
                               int64_t step, int streams) {
  for (const ThroughputCell& c : cells) {
    if (c.row == row && c.step_time_us == step && c.streams == streams && c.figures.requests > 0) {
      return &c;
    }
  }
  return nullptr;
}

// ---- JSON --------------------------------------------------------------------------

std::string FiguresJson(const Figures& f) {
  return absl::StrCat(
      "{\"requests\": ", f.requests, ", \"failed\": ", f.failed, ", \"tokens\": ", f.tokens,
      ", \"messages\": ", f.messages, ", \"seconds\": ", Num(f.seconds),
      ", \"tokens_per_s\": ", Num(f.tokens_per_s), ", \"ttft_us\": {\"p50\": ", Num(f.ttft_p50_us),
      ", \"p99\": ", Num(f.ttft_p99_us), "}, \"inter_token_us\": {\"p50\": ", Num(f.gap_p50_us),
      ", \"p99\": ", Num(f.gap_p99_us), ", \"mean\": ", Num(f.gap_mean_us),
      "}, \"one_way_us\": {\"p50\": ", Num(f.one_way_p50_us), ", \"p99\": ", Num(f.one_way_p99_us),
      "}, \"error\": ", Quote(f.error), "}");
}

std::string LatenciesJson(const Latencies& l) {
  return absl::StrCat("{\"n\": ", l.us.size(), ", \"p50\": ", Num(l.p50()),
                      ", \"p99\": ", Num(l.p99()), ", \"max\": ", Num(l.max()), "}");
}

}  // namespace

std::string FormatReport(const Report& report) {
  std::string out =
      absl::StrCat("pipeline_benchmark  ", report.date, "  ", report.cpus,
                   " CPUs  loadavg at start: ", report.loadavg_start,
                   ", at end: ", report.loadavg_end, "\ncommand: ", report.command, "\n");
  if (!report.nginx_note.empty()) absl::StrAppend(&out, "note: ", report.nginx_note, "\n");
  if (!report.haproxy_note.empty()) absl::StrAppend(&out, "note: ", report.haproxy_note, "\n");
  std::vector<std::string> verdicts;

  if (!report.throughput.empty()) {
    absl::StrAppend(
        &out, "\n## Throughput: ", report.options.tokens, " tokens per request; latencies in us\n",
        absl::StrFormat("%-7s %-12s %7s %8s %4s %10s %6s %7s %9s %9s %8s %8s %8s %8s %7s %6s "
                        "%6s %8s %7s %7s %7s %9s %8s\n",
                        "step_us", "row", "streams", "requests", "fail", "tokens/s", "x base",
                        "x nginx", "TTFT p50", "TTFT p99", "gap p50", "gap p99", "1way p50",
                        "1way p99", "tok/msg", "cli/tk", "srv/tk", "front/tk", "back/tk",
                        "fr wk/tk", "bk wk/tk", "front MiB", "back MiB"));
    for (const ThroughputCell& c : report.throughput) {
      const Figures& f = c.figures;
      if (f.requests == 0) {
        absl::StrAppend(&out, absl::StrFormat("%-7d %-12s %7d  skipped: %s\n", c.step_time_us, c.row,
                                              c.streams, f.error));
        continue;
      }
      absl::StrAppend(
          &out,
          absl::StrFormat(
              "%-7d %-12s %7d %8d %4d %10.0f %6s %7s %9.0f %9.0f %8.0f %8.0f %8.0f %8.0f %7.2f "
              "%6.2f %6.2f %8.2f %7.2f %7.3f %7.3f %9.1f %8.1f\n",
              c.step_time_us, c.row, c.streams, f.requests, f.failed, f.tokens_per_s,
              Ratio(c.ratio_to_baseline), Ratio(c.ratio_to_nginx), f.ttft_p50_us, f.ttft_p99_us,
              f.gap_p50_us, f.gap_p99_us, f.one_way_p50_us, f.one_way_p99_us,
              f.messages > 0 ? static_cast<double>(f.tokens) / f.messages : 0,
              c.client_cpu_us_per_token, c.server_cpu_us_per_token, c.front_cpu_us_per_token,
              c.back_cpu_us_per_token, c.front_runs_per_token, c.back_runs_per_token,
              c.front_peak_rss_kib / 1024.0,
              c.back_peak_rss_kib / 1024.0));
      if (!f.error.empty()) absl::StrAppend(&out, "          ! ", f.error, "\n");
    }
    for (int64_t step : report.options.step_times_us) {
      for (const std::string row : {"orch1", "orch3"}) {
        const ThroughputCell* c = FindCell(report.throughput, row, step, 64);
        const ThroughputCell* nginx = FindCell(report.throughput, "nginx", step, 64);
        if (c == nullptr || c->ratio_to_baseline <= 0) continue;
        verdicts.push_back(absl::StrFormat(
            "%s %s step %d us, 64 streams: %.2fx the baseline (target >= %.1fx), %s nginx",
            Verdict(c->ratio_to_baseline >= kMinRatioAt64 &&
                    (nginx == nullptr || c->ratio_to_nginx > 1)),
            row, step, c->ratio_to_baseline, kMinRatioAt64,
            nginx == nullptr ? "no figure for" : absl::StrFormat("%.2fx", c->ratio_to_nginx)));
      }
    }
    for (const std::string row : {"orch1", "orch3"}) {
      const ThroughputCell* one = FindCell(report.throughput, row, 0, 1);
      if (one != nullptr && one->ratio_to_baseline > 0) {
        verdicts.push_back(absl::StrFormat("%s %s step 0 us, 1 stream: %.2fx the baseline "
                                           "(target >= %.1fx)",
                                           Verdict(one->ratio_to_baseline >= kMinRatioAt1), row,
                                           one->ratio_to_baseline, kMinRatioAt1));
      }
    }
    const ThroughputCell* at64 = FindCell(report.throughput, "orch1", 0, 64);
    if (at64 != nullptr) {
      verdicts.push_back(absl::StrFormat(
          "%s orch1 step 0 us, 64 streams: the orchestrator's own CPU %.2f us per token "
          "(target <= %.1f)",
          Verdict(at64->front_cpu_us_per_token <= kMaxFrontCpuUsPerTokenAt64),
          at64->front_cpu_us_per_token, kMaxFrontCpuUsPerTokenAt64));
    }
    const ThroughputCell* orch4096 = FindCell(report.throughput, "orch1", 0, 4096);
    const ThroughputCell* base4096 = FindCell(report.throughput, "baseline", 0, 4096);
    if (orch4096 != nullptr && base4096 != nullptr && base4096->figures.ttft_p99_us > 0) {
      const double ratio = orch4096->figures.ttft_p99_us / base4096->figures.ttft_p99_us;
      verdicts.push_back(absl::StrFormat(
          "%s orch1 step 0 us, 4096 streams: TTFT p99 %.0f us, %.2fx the baseline's %.0f us "
          "(target <= %.1fx)",
          Verdict(ratio <= kMaxTtftP99VsBaselineAt4096), orch4096->figures.ttft_p99_us, ratio,
          base4096->figures.ttft_p99_us, kMaxTtftP99VsBaselineAt4096));
    }
  }

  absl::StrAppend(&out, FormatRequests(report, &verdicts));

  if (report.light.has_value()) {
    const LightLoad& light = *report.light;
    absl::StrAppend(&out, "\n## Light load: 1 stream, ", light.pace_us, " us per token, ",
                    report.options.tokens, " tokens per request; us\n",
                    absl::StrFormat("%-12s %8s %9s %9s %8s %8s %9s %8s %8s %8s %8s\n", "row",
                                    "requests", "TTFT p50", "TTFT p99", "gap p50", "gap p99",
                                    "gap mean", "1way p50", "1way p99", "front/tk", "fr wk/tk"));
    for (const LightRow& r : light.rows) {
      const Figures& f = r.figures;
      if (f.requests == 0) {
        absl::StrAppend(&out, absl::StrFormat("%-12s  skipped: %s\n", r.row, f.error));
        continue;
      }
      absl::StrAppend(
          &out, absl::StrFormat("%-12s %8d %9.0f %9.0f %8.0f %8.0f %9.1f %8.1f %8.1f %8.2f %8.2f\n",
                                r.row, f.requests, f.ttft_p50_us, f.ttft_p99_us, f.gap_p50_us,
                                f.gap_p99_us, f.gap_mean_us, f.one_way_p50_us, f.one_way_p99_us,
                                r.front_cpu_us_per_token, r.front_runs_per_token));
    }
    const LightRow* orch = FindLight(light, "orch1");
    for (const std::string reference : {"baseline", "nginx", "haproxy", "relay-cb", "relay-async",
                                            "relay-async2"}) {
      const LightRow* ref = FindLight(light, reference);
      if (orch == nullptr || ref == nullptr) continue;
      const double ttft = orch->figures.ttft_p50_us - ref->figures.ttft_p50_us;
      const double gap = orch->figures.gap_p50_us - ref->figures.gap_p50_us;
      const double mean = orch->figures.gap_mean_us - ref->figures.gap_mean_us;
      const double one_way50 = orch->figures.one_way_p50_us - ref->figures.one_way_p50_us;
      const double one_way99 = orch->figures.one_way_p99_us - ref->figures.one_way_p99_us;
      absl::StrAppend(&out, absl::StrFormat("orch1 vs %-12s: TTFT p50 %+.0f us, gap p50 %+.0f us, "
                                            "gap mean %+.1f us, one-way p50 %+.1f us, p99 "
                                            "%+.1f us\n",
                                            reference, ttft, gap, mean, one_way50, one_way99));
      if (reference == "baseline") {
        verdicts.push_back(absl::StrFormat(
            "%s light load, first token p50 %+.0f us vs the baseline (target <= +%.0f us)",
            Verdict(ttft <= kMaxAddedTtftP50Us), ttft, kMaxAddedTtftP50Us));
        verdicts.push_back(absl::StrFormat(
            "%s light load, one way vs the baseline: p50 %+.0f us, p99 %+.0f us (targets "
            "<= +%.0f, +%.0f us)",
            Verdict(one_way50 <= kMaxAddedOneWayP50Us && one_way99 <= kMaxAddedOneWayP99Us),
            one_way50, one_way99, kMaxAddedOneWayP50Us, kMaxAddedOneWayP99Us));
      }
    }
  }

  for (const AbortFigures& a : report.aborts) {
    absl::StrAppend(
        &out, "\n## Abort: ", a.aborted, " aborts, one at a time, each with ", a.in_flight,
        " requests in flight (1 ms steps)\n",
        absl::StrFormat(
            "Abort RPC -> terminal ABORT: p50 %.0f us, p99 %.0f us, max %.0f us (n=%d)\n"
            "Abort RPC -> its response:   p50 %.0f us, p99 %.0f us\n"
            "Bare gRPC round trips at the same load (1-output calls to the baseline "
            "between aborts):\n"
            "  one:         p50 %.0f us, p99 %.0f us\n"
            "  two in turn: p50 %.0f us, p99 %.0f us (an abort needs two, and a step's end)\n",
            a.terminal.p50(), a.terminal.p99(), a.terminal.max(), a.aborted, a.rpc.p50(),
            a.rpc.p99(), a.round_trip.p50(), a.round_trip.p99(), a.two_round_trips.p50(),
            a.two_round_trips.p99()));
    if (!a.error.empty()) absl::StrAppend(&out, "! ", a.error, "\n");
    if (!a.terminal.us.empty() && a.in_flight == report.options.abort_streams) {
      verdicts.push_back(
          absl::StrFormat("%s abort p99 at %d in flight: %.0f us (target <= %.0f us)",
                          Verdict(a.terminal.p99() <= kMaxAbortP99Us), a.in_flight,
                          a.terminal.p99(), kMaxAbortP99Us));
    }
  }

  if (report.kill.has_value()) {
    const KillFigures& k = *report.kill;
    absl::StrAppend(&out, "\n## kill -9 of one of 2 replicas, ", k.in_flight, " in flight, ",
                    k.rounds.size(), " rounds\n");
    for (const KillRound& r : k.rounds) {
      absl::StrAppend(&out, absl::StrFormat("bound %s: replica %d killed, %d requests got a "
                                            "terminal error, %d others still streaming\n",
                                            absl::StrJoin(r.bound_before, " + "), r.killed_replica,
                                            r.failed, r.unaffected_running));
    }
    absl::StrAppend(&out, absl::StrFormat("kill -9 -> terminal error: p50 %.0f us, p99 %.0f us, "
                                          "max %.0f us (%d)\n",
                                          k.terminal.p50(), k.terminal.p99(), k.terminal.max(),
                                          k.terminal.us.size()));
    if (!k.error.empty()) absl::StrAppend(&out, "! ", k.error, "\n");
  }

  if (report.idle.has_value()) {
    const IdleFigures& i = *report.idle;
    absl::StrAppend(&out,
                    absl::StrFormat("\n## Idle CPU over %.1f s, in ms per 10 s\n", i.seconds));
    for (const ProcessIdle& p : i.processes) {
      absl::StrAppend(&out, absl::StrFormat("%-28s %7.2f ms (schedstat)  %5.0f ms (ticks)\n",
                                            p.process, p.sched_ms_per_10s, p.tick_ms_per_10s));
      if (p.process == "orchestrator" || p.process == "stage_worker") {
        verdicts.push_back(
            absl::StrFormat("%s idle CPU of the %s: %.2f ms per 10 s (target <= %.0f)",
                            Verdict(p.sched_ms_per_10s <= kMaxIdleCpuMsPer10s), p.process,
                            p.sched_ms_per_10s, kMaxIdleCpuMsPer10s));
      }
    }
    absl::StrAppend(
        &out,
        absl::StrFormat("## Memory: orchestrator RSS %d KiB idle, %d KiB with %d in flight: "
                        "%.0f KiB per 1,000 requests (worker: %d -> %d KiB)\n",
                        i.rss_idle_kib, i.rss_loaded_kib, i.in_flight, i.kib_per_1000_requests,
                        i.worker_rss_idle_kib, i.worker_rss_loaded_kib));
    if (i.baseline_kib_per_1000_streams > 0) {
      const double ratio = i.kib_per_1000_requests / i.baseline_kib_per_1000_streams;
      absl::StrAppend(&out, absl::StrFormat("## Memory, bare gRPC: a fresh baseline server's RSS "
                                            "%d KiB idle, %d KiB with %d open streams: %.0f KiB "
                                            "per 1,000 streams\n",
                                            i.baseline_rss_idle_kib, i.baseline_rss_loaded_kib,
                                            i.in_flight, i.baseline_kib_per_1000_streams));
      verdicts.push_back(absl::StrFormat(
          "%s memory per in-flight request: %.0f KiB per 1,000, %.2fx the bare gRPC server's "
          "%.0f per 1,000 streams (target <= %.1fx)",
          Verdict(ratio <= kMaxMemoryVsBareGrpc), i.kib_per_1000_requests, ratio,
          i.baseline_kib_per_1000_streams, kMaxMemoryVsBareGrpc));
    }
    if (!i.error.empty()) absl::StrAppend(&out, "! ", i.error, "\n");
  }

  if (!verdicts.empty()) {
    absl::StrAppend(&out, "\n## Targets\n", absl::StrJoin(verdicts, "\n"), "\n");
  }
  return out;
}

std::string JsonReport(const Report& report) {
  std::string out = absl::StrCat(
      "{\n  \"command\": ", Quote(report.command), ",\n  \"date\": ", Quote(report.date),
      ",\n  \"cpus\": ", report.cpus, ",\n  \"loadavg_start\": ", Quote(report.loadavg_start),
      ",\n  \"loadavg_end\": ", Quote(report.loadavg_end),
      ",\n  \"tokens_per_request\": ", report.options.tokens,
      ",\n  \"nginx_note\": ", Quote(report.nginx_note),
      ",\n  \"haproxy_note\": ", Quote(report.haproxy_note), ",\n  \"throughput\": [");
  for (size_t i = 0; i < report.throughput.size(); ++i) {
    const ThroughputCell& c = report.throughput[i];
    absl::StrAppend(&out, i == 0 ? "\n" : ",\n", "    {\"row\": ", Quote(c.row),
                    ", \"step_time_us\": ", c.step_time_us, ", \"streams\": ", c.streams,
                    ", \"ratio_to_baseline\": ", Num(c.ratio_to_baseline),
                    ", \"ratio_to_nginx\": ", Num(c.ratio_to_nginx),
                    ", \"client_cpu_us_per_token\": ", Num(c.client_cpu_us_per_token),
                    ", \"server_cpu_us_per_token\": ", Num(c.server_cpu_us_per_token),
                    ", \"front_cpu_us_per_token\": ", Num(c.front_cpu_us_per_token),
                    ", \"back_cpu_us_per_token\": ", Num(c.back_cpu_us_per_token),
                    ", \"front_runs_per_token\": ", Num(c.front_runs_per_token),
                    ", \"back_runs_per_token\": ", Num(c.back_runs_per_token),
                    ", \"front_peak_rss_kib\": ", c.front_peak_rss_kib,
                    ", \"back_peak_rss_kib\": ", c.back_peak_rss_kib, ", \"figures\": ", FiguresJson(c.figures), "}");
  }
  absl::StrAppend(&out, "\n  ]");
  if (!report.requests.empty()) absl::StrAppend(&out, ",\n  ", RequestsJson(report));
  if (report.light.has_value()) {
    absl::StrAppend(&out, ",\n  \"light_load\": {\"pace_us\": ", report.light->pace_us,
                    ", \"rows\": [");
    for (size_t i = 0; i < report.light->rows.size(); ++i) {
      const LightRow& r = report.light->rows[i];
      absl::StrAppend(&out, i == 0 ? "\n" : ",\n", "    {\"row\": ", Quote(r.row),
                      ", \"front_cpu_us_per_token\": ", Num(r.front_cpu_us_per_token),
                      ", \"front_runs_per_token\": ", Num(r.front_runs_per_token),
                      ", \"figures\": ", FiguresJson(r.figures), "}");
    }
    absl::StrAppend(&out, "\n  ]}");
  }
  if (!report.aborts.empty()) {
    absl::StrAppend(&out, ",\n  \"abort\": [");
    for (size_t j = 0; j < report.aborts.size(); ++j) {
      const AbortFigures& a = report.aborts[j];
      absl::StrAppend(&out, j == 0 ? "\n    " : ",\n    ", "{\"in_flight\": ", a.in_flight,
                      ", \"aborted\": ", a.aborted,
                      ", \"mode\": \"one at a time, each victim replaced\", \"terminal_us\": ",
                      LatenciesJson(a.terminal), ", \"rpc_us\": ", LatenciesJson(a.rpc),
                      ", \"bare_round_trip_us\": ", LatenciesJson(a.round_trip),
                      ", \"bare_two_round_trips_us\": ", LatenciesJson(a.two_round_trips),
                      ", \"error\": ", Quote(a.error), "}");
    }
    absl::StrAppend(&out, "\n  ]");
  }
  if (report.kill.has_value()) {
    const KillFigures& k = *report.kill;
    absl::StrAppend(&out, ",\n  \"kill\": {\"in_flight\": ", k.in_flight, ", \"rounds\": [");
    for (size_t j = 0; j < k.rounds.size(); ++j) {
      const KillRound& r = k.rounds[j];
      absl::StrAppend(&out, j == 0 ? "" : ", ", "{\"bound_before\": [",
                      absl::StrJoin(r.bound_before, ", "),
                      "], \"killed_replica\": ", r.killed_replica, ", \"failed\": ", r.failed,
                      ", \"unaffected_running\": ", r.unaffected_running, "}");
    }
    absl::StrAppend(&out, "], \"terminal_us\": ", LatenciesJson(k.terminal),
                    ", \"error\": ", Quote(k.error), "}");
  }
  if (report.idle.has_value()) {
    const IdleFigures& i = *report.idle;
    absl::StrAppend(&out, ",\n  \"idle\": {\"seconds\": ", Num(i.seconds),
                    ", \"cpu_ms_per_10s\": [");
    for (size_t j = 0; j < i.processes.size(); ++j) {
      const ProcessIdle& p = i.processes[j];
      absl::StrAppend(&out, j == 0 ? "" : ", ", "{\"process\": ", Quote(p.process),
                      ", \"schedstat\": ", Num(p.sched_ms_per_10s),
                      ", \"ticks\": ", Num(p.tick_ms_per_10s), "}");
    }
    absl::StrAppend(&out, "],\n    \"memory\": {\"in_flight\": ", i.in_flight,
                    ", \"orchestrator_rss_idle_kib\": ", i.rss_idle_kib,
                    ", \"orchestrator_rss_loaded_kib\": ", i.rss_loaded_kib,
                    ", \"kib_per_1000_requests\": ", Num(i.kib_per_1000_requests),
                    ", \"worker_rss_idle_kib\": ", i.worker_rss_idle_kib,
                    ", \"worker_rss_loaded_kib\": ", i.worker_rss_loaded_kib,
                    ", \"baseline_rss_idle_kib\": ", i.baseline_rss_idle_kib,
                    ", \"baseline_rss_loaded_kib\": ", i.baseline_rss_loaded_kib,
                    ", \"baseline_kib_per_1000_streams\": ", Num(i.baseline_kib_per_1000_streams),
                    "}, \"error\": ", Quote(i.error), "}");
  }
  absl::StrAppend(&out, "\n}\n");
  return out;
}

}  // namespace bench
}  // namespace omnistage
