#include "tests/bench/request_scenarios.h"

#include <time.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "tests/bench/counting_collector.h"
#include "tests/bench/gateway_load.h"
#include "tests/bench/targets.h"
#include "tests/failover_metrics.h"

namespace omnistage {
namespace bench {
namespace {

constexpr char kTextGrpc[] = "text-grpc";
constexpr char kGateway[] = "gateway";

// This process's CPU time so far, its threads that have ended included (the
// slot rows' client threads end before the cell's last reading; schedstat
// counts only the threads alive).
int64_t ClientCpuNs() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<int64_t>(t.tv_sec) * 1000000000 + t.tv_nsec;
}

// CPU time of the client (this process), and CPU time and runs on a CPU of the
// front process and the rest of the serving side, between Start() and Finish().
class CpuWatch {
 public:
  CpuWatch(pid_t front, std::vector<pid_t> back) : front_(front), back_(std::move(back)) {}

  void Start() {
    client_ns_ = ClientCpuNs();
    front_before_ = Cpu({front_});
    back_before_ = Cpu(back_);
  }

  // Sets the cell's figures per request.
  void Finish(RequestCell& cell) const {
    if (cell.requests == 0) return;
    const double requests = static_cast<double>(cell.requests);
    const int64_t client_ns = ClientCpuNs();
    const ProcessCpu front = Cpu({front_});
    const ProcessCpu back = Cpu(back_);
    cell.client_cpu_us_per_request = (client_ns - client_ns_) / 1e3 / requests;
    cell.front_cpu_us_per_request = (front.sched_ns - front_before_.sched_ns) / 1e3 / requests;
    cell.back_cpu_us_per_request = (back.sched_ns - back_before_.sched_ns) / 1e3 / requests;
    cell.front_runs_per_request = (front.runs - front_before_.runs) / requests;
    cell.back_runs_per_request = (back.runs - back_before_.runs) / requests;
  }

 private:
  const pid_t front_;
  const std::vector<pid_t> back_;
  int64_t client_ns_ = 0;
  ProcessCpu front_before_, back_before_;
};

// Requests/s, and `error` (what failed, or whether the cell was cut); without
// one, a note when a request did not make `outputs` outputs (every reply is at
// least that long, so each ends by max_tokens).
void Finish(RequestCell& cell, const std::string& error) {
  cell.requests_per_s = cell.seconds > 0 ? cell.requests / cell.seconds : 0;
  cell.error = error;
  if (cell.error.empty() && cell.tokens != cell.requests * cell.outputs) {
    cell.error = absl::StrCat(cell.tokens, " outputs counted in ", cell.requests, " requests of ",
                              cell.outputs);
  }
  std::fprintf(stderr, "  %-10s %3d outputs: %8.0f requests/s %s\n", cell.row.c_str(), cell.outputs,
               cell.requests_per_s, cell.error.c_str());
}

RequestCell NewCell(const std::string& row, int outputs, const BenchOptions& options) {
  RequestCell cell;
  cell.row = row;
  cell.outputs = outputs;
  cell.streams = options.request_streams;
  return cell;
}

// A traced row's orchestrator: its spans so far, exported and dropped.
struct SpanCounts {
  double exported = 0;
  double dropped = 0;
};
SpanCounts SpansOf(const Target& target) {
  absl::StatusOr<std::string> exposition = ScrapeMetrics(target.orchestrator.metrics_port);
  if (!exposition.ok()) return {};
  return {SampleIn(*exposition, "omnistage_trace_spans_total{outcome=\"exported\"}"),
          SampleIn(*exposition, "omnistage_trace_spans_total{outcome=\"dropped\"}")};
}

// A row of the load generator's streams: baseline, orch1, orch3 or a traced row.
void StreamRow(const std::string& row, const BenchOptions& options, BenchEnv& env,
               std::vector<RequestCell>& cells) {
  std::fprintf(stderr, "requests: %s\n", row.c_str());
  std::unique_ptr<Target> target = OpenTarget(row, 0, 1, /*stamp=*/false, env);
  std::shared_ptr<v1::Orchestrator::Stub> stub;
  if (target->error.empty()) stub = Warm(*target);
  for (const int outputs : options.request_outputs) {
    RequestCell& cell = cells.emplace_back(NewCell(row, outputs, options));
    if (stub == nullptr) {
      cell.error = target->error;
      continue;
    }
    const std::vector<pid_t> serving = ServingPids(row, *target, env);
    CpuWatch cpu(serving.front(), std::vector<pid_t>(serving.begin() + 1, serving.end()));
    const SpanCounts spans_before = TracedRow(row) ? SpansOf(*target) : SpanCounts{};
    cpu.Start();
    const Figures f = RunLoad(stub, options.request_streams, options.request_time,
                              TargetRequests(*target, outputs, 0, false),
                              options.request_time + absl::Seconds(60));
    cell.requests = f.requests;
    cell.failed = f.failed;
    cell.tokens = f.tokens;
    cell.seconds = f.seconds;
    cell.ttft_p50_us = f.ttft_p50_us;
    cell.ttft_p99_us = f.ttft_p99_us;
    cpu.Finish(cell);
    if (TracedRow(row) && cell.requests > 0) {
      const SpanCounts spans = SpansOf(*target);
      const double requests = static_cast<double>(cell.requests);
      cell.spans_exported_per_request = (spans.exported - spans_before.exported) / requests;
      cell.spans_dropped_per_request = (spans.dropped - spans_before.dropped) / requests;
    }
    Finish(cell, f.error);
    absl::SleepFor(absl::Milliseconds(200));  // Let the servers settle between cells.
  }
}

// One cell of blocking slot clients, each opened by `open`.
void SlotCell(RequestCell& cell, const BenchOptions& options,
              const std::function<Caller(int)>& open, CpuWatch& cpu) {
  SlotLoad load;
  load.streams = options.request_streams;
  load.run_for = options.request_time;
  load.open = open;
  load.on_start = [&cpu] { cpu.Start(); };
  const SlotTotals totals = RunSlots(load);
  cell.requests = totals.requests;
  cell.failed = totals.failed;
  cell.tokens = totals.tokens;
  cell.seconds = totals.seconds;
  cell.ttft_p50_us = Percentile(totals.ttft_us, 50);
  cell.ttft_p99_us = Percentile(totals.ttft_us, 99);
  cpu.Finish(cell);
  Finish(cell, totals.failed == 0 ? ""
                                  : absl::StrCat(totals.failed, " of ", totals.requests,
                                                 " requests failed; first: ", totals.first_error));
  absl::SleepFor(absl::Milliseconds(200));
}

// The text-grpc row, and the gateway row if `gateway`, on one stack.
void GatewayRows(bool gateway, const BenchOptions& options, BenchEnv& env,
                 const absl::StatusOr<std::string>& gateway_binary,
                 std::vector<RequestCell>& cells) {
  std::fprintf(stderr, "requests: %s\n", gateway ? "text-grpc, gateway" : kTextGrpc);
  absl::StatusOr<std::unique_ptr<GatewayStack>> stack =
      gateway_binary.ok() ? GatewayStack::Start(env.binaries, *gateway_binary, env.dir, 0)
                          : absl::StatusOr<std::unique_ptr<GatewayStack>>(gateway_binary.status());
  for (const int outputs : options.request_outputs) {
    cells.push_back(NewCell(kTextGrpc, outputs, options));
    if (gateway) cells.push_back(NewCell(kGateway, outputs, options));
    // Pointers once both are in (a push_back may move the cells).
    RequestCell* grpc_cell = &cells[cells.size() - (gateway ? 2 : 1)];
    RequestCell* gateway_cell = gateway ? &cells.back() : nullptr;
    if (!stack.ok()) {
      for (RequestCell* cell : {grpc_cell, gateway_cell}) {
        if (cell != nullptr) {
          cell->error = absl::StrCat("the gateway stack did not start: ", stack.status().message());
        }
      }
      continue;
    }
    const GatewayStack& s = **stack;
    std::vector<pid_t> workers = ChildPids(s.orchestrator.pid());
    CpuWatch grpc_cpu(s.orchestrator.pid(), workers);
    SlotCell(
        *grpc_cell, options, [&s, outputs](int) { return GrpcCaller(s.stub, outputs); }, grpc_cpu);
    if (gateway_cell != nullptr) {
      std::vector<pid_t> back = {s.orchestrator.pid()};
      back.insert(back.end(), workers.begin(), workers.end());
      CpuWatch cpu(s.gateway.pid(), back);
      const int port = s.gateway.port;
      SlotCell(
          *gateway_cell, options, [port, outputs](int) { return SseCaller(port, outputs); }, cpu);
    }
  }
}

}  // namespace

std::vector<RequestCell> RunRequests(const BenchOptions& options, BenchEnv& env,
                                     const absl::StatusOr<std::string>& gateway_binary) {
  std::vector<RequestCell> cells;
  bool stack_done = false;
  const auto& rows = options.request_rows;
  auto asked = [&rows](const std::string& row) {
    return std::find(rows.begin(), rows.end(), row) != rows.end();
  };
  // The traced rows' collector, in this process (its CPU is the client's).
  std::unique_ptr<CountingCollector> collector;
  if (std::any_of(rows.begin(), rows.end(), TracedRow)) {
    collector = std::make_unique<CountingCollector>();
    env.otlp_endpoint = collector->endpoint();
  }
  for (const std::string& row : rows) {
    if (row == kTextGrpc || row == kGateway) {
      if (!stack_done) GatewayRows(asked(kGateway), options, env, gateway_binary, cells);
      stack_done = true;
    } else if (row == "baseline" || row == "orch1" || row == "orch3" || TracedRow(row) ||
               env.relays.count(row) > 0) {
      StreamRow(row, options, env, cells);
    } else {
      for (const int outputs : options.request_outputs) {
        cells.emplace_back(NewCell(row, outputs, options)).error =
            absl::StrCat("unknown row '", row,
                         "' (baseline, orch1, orch3, gateway, text-grpc, relay-cb, relay-async, "
                         "relay-async2, trace-0.01, trace-1, trace-down)");
      }
    }
  }
  // Ratios within each count of outputs: to the baseline's requests/s, and
  // the gateway's to text-grpc's (same engine, same processes).
  std::map<std::pair<std::string, int>, double> rate;
  for (const RequestCell& cell : cells) rate[{cell.row, cell.outputs}] = cell.requests_per_s;
  for (RequestCell& cell : cells) {
    const double baseline = rate[{"baseline", cell.outputs}];
    const double grpc = rate[{kTextGrpc, cell.outputs}];
    if (cell.row == kGateway) {
      if (grpc > 0) cell.ratio_to_text_grpc = cell.requests_per_s / grpc;
    } else if (cell.row != kTextGrpc && baseline > 0) {
      cell.ratio_to_baseline = cell.requests_per_s / baseline;
    }
  }
  return cells;
}

}  // namespace bench
}  // namespace omnistage
