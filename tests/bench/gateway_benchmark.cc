// gateway_benchmark: what the OpenAI-compatible gateway (//gateway) adds in
// front of an orchestrator, each figure measured per run and as the spread
// (min..max) over --runs runs. No targets, no verdicts.
//
//   bazel build -c opt //tests/bench:gateway_benchmark
//   bazel-out/k8-opt/bin/tests/bench/gateway_benchmark --runs=3 --json=/tmp/gateway.json
//
// The pipeline is one thinker stage (1 replica, capacity 4096, one word of text
// per step; gateway_load.h), at --step_times_us. Per step time, a fresh
// orchestrator and gateway, then for each of --streams:
//
//   throughput  N streams of --tokens-token requests back to back for
//               --cell_seconds, once with gRPC straight to the orchestrator and
//               once as SSE through the gateway (the order alternates by run,
//               so that drift in the machine's load hits both): tokens/s (words
//               of text), the gateway's over gRPC's, TTFT p50/p99 and what the
//               gateway adds to them (same run, same processes).
//   process     the gateway during the SSE cell: CPU per token (schedstat), its
//               share of a core, wake-ups per token, threads and RSS (sampled
//               every 50 ms, and idle before the first cell).
//   many        --many_streams SSE streams of long requests (--many_step_time_us)
//               opened through the gateway from one client thread (non-blocking
//               sockets, epoll; many_streams.h) and held open --hold_seconds once every one has
//               its first token: the gateway's threads and RSS meanwhile, and
//               that every stream got one. It serves them from one event
//               loop, not a thread each.
//
// Clients and server share the machine: on a small one the figures include
// their competition for CPUs. Every process listens on 127.0.0.1, is stopped
// by PID, also on failure, and dies with the program; the whole run is bounded
// by --max_seconds. See docs/openai.md for the gateway.
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <optional>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "tests/bench/bench_processes.h"
#include "tests/bench/gateway_load.h"
#include "tests/bench/load_generator.h"
#include "tests/bench/many_streams.h"
#include "tests/bench/run_table.h"

ABSL_FLAG(std::string, scenarios, "throughput,many", "which of throughput (with process), many");
ABSL_FLAG(int, runs, 3, "times each scenario runs; every figure is shown per run and as min..max");
ABSL_FLAG(double, cell_seconds, 3, "each throughput cell runs requests back to back this long");
ABSL_FLAG(std::string, streams, "1,64", "concurrent streams of the throughput cells");
ABSL_FLAG(std::string, step_times_us, "0,10000", "the thinker's step times, one pipeline each");
ABSL_FLAG(int, tokens, 200, "tokens (words) per request in the throughput cells");
ABSL_FLAG(int, many_streams, 2000, "SSE streams held open at once in the many scenario");
ABSL_FLAG(int, many_step_time_us, 10000, "the thinker's step time in the many scenario");
ABSL_FLAG(double, hold_seconds, 2, "how long the many scenario holds its streams open");
ABSL_FLAG(std::string, json, "", "also write the figures as JSON to this path");
ABSL_FLAG(int, max_seconds, 900, "the whole run is cut (exit 3) after this long");

namespace omnistage {
namespace bench {
namespace {

struct Env {
  Binaries binaries;
  std::string gateway;  // The gateway binary.
  std::string dir;
  absl::Duration cell;
  std::vector<int> streams;
  std::vector<int64_t> step_times_us;
  int tokens = 0;
  SwarmOptions many;
  int64_t many_step_time_us = 0;
};

// What the gateway process did during one SSE cell.
struct GatewayUse {
  double cpu_us_per_token = 0;
  double cores = 0;  // CPU time over the cell's wall time.
  double runs_per_token = 0;
  int threads_max = 0;
  int64_t rss_max_kib = 0;
};

SlotTotals ThroughGrpc(const Env& env, const GatewayStack& stack, int streams) {
  SlotLoad load;
  load.streams = streams;
  load.run_for = env.cell;
  load.open = [&](int) { return GrpcCaller(stack.stub, env.tokens); };
  return RunSlots(load);
}

SlotTotals ThroughGateway(const Env& env, const GatewayStack& stack, int streams, GatewayUse* use) {
  const pid_t pid = stack.gateway.pid();
  auto sample = [&] {
    use->threads_max = std::max(use->threads_max, ReadThreadCount(pid).value_or(0));
    use->rss_max_kib = std::max(use->rss_max_kib, ReadRssKib(pid).value_or(0));
  };
  SlotLoad load;
  load.streams = streams;
  load.run_for = env.cell;
  load.open = [&](int) { return SseCaller(stack.gateway.port, env.tokens); };
  load.tick = sample;
  const ProcessCpu before = ReadProcessCpu(pid).value_or(ProcessCpu{});
  const SlotTotals totals = RunSlots(load);
  const ProcessCpu after = ReadProcessCpu(pid).value_or(ProcessCpu{});
  sample();
  const double tokens = std::max<double>(totals.tokens, 1);
  use->cpu_us_per_token = (after.sched_ns - before.sched_ns) / 1e3 / tokens;
  use->runs_per_token = (after.runs - before.runs) / tokens;
  use->cores = totals.seconds > 0 ? (after.sched_ns - before.sched_ns) / 1e9 / totals.seconds : 0;
  return totals;
}

// Failures, and a count that is not `tokens` per request: every reply is
// longer than that, so each request ends by max_tokens, and the two clients
// must count alike for their figures to compare.
void NoteErrors(const std::string& label, int run, const SlotTotals& totals, int tokens,
                Table& table) {
  if (totals.failed > 0) {
    table.errors.push_back(absl::StrCat("run ", run + 1, ": ", label, ": ", totals.failed,
                                        " failed; first: ", totals.first_error));
  } else if (totals.tokens != totals.requests * tokens) {
    table.errors.push_back(absl::StrCat("run ", run + 1, ": ", label, ": ", totals.tokens,
                                        " tokens counted in ", totals.requests, " requests of ",
                                        tokens));
  }
}

absl::Status Throughput(const Env& env, int run, Table& throughput, Table& process) {
  for (const int64_t step_time_us : env.step_times_us) {
    absl::StatusOr<std::unique_ptr<GatewayStack>> stack =
        GatewayStack::Start(env.binaries, env.gateway, env.dir, step_time_us);
    if (!stack.ok()) {
      return absl::Status(stack.status().code(),
                          absl::StrCat("step ", step_time_us, " us: ", stack.status().message()));
    }
    const pid_t gateway = (*stack)->gateway.pid();
    const double threads_idle = ReadThreadCount(gateway).value_or(0);
    const double rss_idle_mib = ReadRssKib(gateway).value_or(0) / 1024.0;
    for (const int streams : env.streams) {
      const std::string cell = absl::StrCat("step ", step_time_us, " us, ", streams,
                                            streams == 1 ? " stream" : " streams");
      SlotTotals grpc, sse;
      GatewayUse use;
      for (int k = 0; k < 2; ++k) {
        if ((k + run) % 2 == 0) {
          grpc = ThroughGrpc(env, **stack, streams);
        } else {
          sse = ThroughGateway(env, **stack, streams, &use);
        }
      }
      NoteErrors(cell + ", gRPC", run, grpc, env.tokens, throughput);
      NoteErrors(cell + ", gateway", run, sse, env.tokens, throughput);
      const double grpc_p50 = Percentile(grpc.ttft_us, 50), grpc_p99 = Percentile(grpc.ttft_us, 99);
      const double sse_p50 = Percentile(sse.ttft_us, 50), sse_p99 = Percentile(sse.ttft_us, 99);
      throughput.Add(cell + ", gRPC", run,
                     {grpc.tokens_per_second(), kNone, grpc_p50, grpc_p99, kNone, kNone,
                      static_cast<double>(grpc.requests), static_cast<double>(grpc.failed)});
      throughput.Add(
          cell + ", gateway", run,
          {sse.tokens_per_second(),
           grpc.tokens_per_second() > 0 ? sse.tokens_per_second() / grpc.tokens_per_second()
                                        : kNone,
           sse_p50, sse_p99, sse_p50 - grpc_p50, sse_p99 - grpc_p99,
           static_cast<double>(sse.requests), static_cast<double>(sse.failed)});
      process.Add(cell, run,
                  {use.cpu_us_per_token, use.cores, use.runs_per_token, threads_idle,
                   static_cast<double>(use.threads_max), rss_idle_mib, use.rss_max_kib / 1024.0});
    }
  }
  return absl::OkStatus();
}

absl::Status Many(const Env& env, int run, Table& table) {
  absl::StatusOr<std::unique_ptr<GatewayStack>> stack =
      GatewayStack::Start(env.binaries, env.gateway, env.dir, env.many_step_time_us);
  if (!stack.ok()) return stack.status();
  const pid_t gateway = (*stack)->gateway.pid();
  const int threads_idle = ReadThreadCount(gateway).value_or(0);
  const int64_t rss_idle_kib = ReadRssKib(gateway).value_or(0);
  int threads_max = 0;
  int64_t rss_max_kib = 0;
  std::optional<ProcessCpu> first_cpu;
  ProcessCpu last_cpu;
  int64_t first_ns = 0, last_ns = 0;
  SwarmOptions options = env.many;
  options.port = (*stack)->gateway.port;
  options.sample = [&] {
    threads_max = std::max(threads_max, ReadThreadCount(gateway).value_or(0));
    rss_max_kib = std::max(rss_max_kib, ReadRssKib(gateway).value_or(0));
    last_cpu = ReadProcessCpu(gateway).value_or(ProcessCpu{});
    last_ns = NowNs();
    if (!first_cpu.has_value()) {
      first_cpu = last_cpu;
      first_ns = last_ns;
    }
  };
  const SwarmResult r = RunSwarm(options);
  if (r.failed > 0) {
    table.errors.push_back(absl::StrCat("run ", run + 1, ": ", r.failed, " of ", r.streams,
                                        " streams failed; first: ", r.first_error));
  }
  const double held_ns = std::max<double>(last_ns - first_ns, 1);
  const double cores =
      first_cpu.has_value() ? (last_cpu.sched_ns - first_cpu->sched_ns) / held_ns : kNone;
  table.Add(absl::StrCat(r.streams, " streams, step ", env.many_step_time_us, " us"), run,
            {static_cast<double>(r.with_token), static_cast<double>(r.failed),
             static_cast<double>(r.open_at_end), r.open_seconds, static_cast<double>(threads_idle),
             static_cast<double>(threads_max), rss_idle_kib / 1024.0, rss_max_kib / 1024.0,
             static_cast<double>(rss_max_kib - rss_idle_kib) / std::max(r.streams, 1),
             r.hold_seconds > 0 ? r.hold_tokens / r.hold_seconds : kNone, cores});
  return absl::OkStatus();
}

template <typename T>
bool ParseList(const std::string& flag, const std::string& text, std::vector<T>* out) {
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    T value = 0;
    if (!absl::SimpleAtoi(part, &value) || value < 0) {
      std::cerr << "gateway_benchmark: --" << flag << ": '" << part << "' is not a count\n";
      return false;
    }
    out->push_back(value);
  }
  return true;
}

int Run(int argc, char** argv) {
  const std::vector<std::string> scenarios =
      absl::StrSplit(absl::GetFlag(FLAGS_scenarios), ',', absl::SkipEmpty());
  for (const std::string& s : scenarios) {
    if (s != "throughput" && s != "many") {
      std::cerr << "gateway_benchmark: --scenarios: unknown scenario '" << s << "'\n";
      return 2;
    }
  }
  auto wants = [&](const std::string& name) {
    return std::find(scenarios.begin(), scenarios.end(), name) != scenarios.end();
  };
  Env env;
  if (!ParseList("streams", absl::GetFlag(FLAGS_streams), &env.streams) ||
      !ParseList("step_times_us", absl::GetFlag(FLAGS_step_times_us), &env.step_times_us)) {
    return 2;
  }
  const int runs = absl::GetFlag(FLAGS_runs);
  StartWatchdog("gateway_benchmark", absl::GetFlag(FLAGS_max_seconds));
  env.cell = absl::Seconds(absl::GetFlag(FLAGS_cell_seconds));
  env.tokens = absl::GetFlag(FLAGS_tokens);
  env.many.streams = absl::GetFlag(FLAGS_many_streams);
  env.many.hold = absl::Seconds(absl::GetFlag(FLAGS_hold_seconds));
  env.many_step_time_us = absl::GetFlag(FLAGS_many_step_time_us);
  absl::StatusOr<GatewayBinaries> found = FindGatewayBinaries(argv[0]);
  if (!found.ok()) {
    std::cerr << "gateway_benchmark: " << found.status().message() << "\n";
    return 2;
  }
  env.binaries = found->binaries;
  env.gateway = found->gateway;
  env.dir = found->dir->path();
  const std::string header = RunHeader(argc, argv);

  Table throughput(
      absl::StrCat("throughput: one thinker stage (capacity 4096), N streams of ", env.tokens,
                   "-token requests back to back for ", absl::FormatDuration(env.cell),
                   "; gRPC straight to the orchestrator, SSE through the gateway; TTFT in us, "
                   "+: the gateway's minus gRPC's"),
      {"tok/s", "x gRPC", "TTFT p50", "TTFT p99", "+p50", "+p99", "requests", "failed"});
  Table process(
      "process: the gateway during the SSE cells above: CPU per token (schedstat), cores busy, "
      "wake-ups per token; threads and RSS idle (before the cells) and at most (every 50 ms)",
      {"CPU us/tok", "cores", "runs/tok", "threads idle", "threads max", "RSS idle MiB",
       "RSS max MiB"});
  Table many(
      absl::StrCat("many: SSE streams of long requests opened from one client thread (epoll), "
                   "held ",
                   absl::FormatDuration(env.many.hold),
                   " once every one has a token; the gateway's threads, RSS and CPU meanwhile"),
      {"with token", "failed", "open at end", "open s", "threads idle", "threads held",
       "RSS idle MiB", "RSS held MiB", "KiB/stream", "tok/s held", "cores"});
  for (int run = 0; run < runs; ++run) {
    if (wants("throughput")) {
      std::fprintf(stderr, "gateway_benchmark: run %d/%d: throughput\n", run + 1, runs);
      if (absl::Status s = Throughput(env, run, throughput, process); !s.ok()) {
        throughput.errors.push_back(absl::StrCat("run ", run + 1, ": ", s.message()));
      }
    }
    if (wants("many")) {
      std::fprintf(stderr, "gateway_benchmark: run %d/%d: many\n", run + 1, runs);
      if (absl::Status s = Many(env, run, many); !s.ok()) {
        many.errors.push_back(absl::StrCat("run ", run + 1, ": ", s.message()));
      }
    }
  }
  std::vector<Table> tables;
  if (wants("throughput")) {
    tables.push_back(throughput);
    tables.push_back(process);
  }
  if (wants("many")) tables.push_back(many);
  return PrintTables("gateway_benchmark", header, tables, absl::GetFlag(FLAGS_json));
}

}  // namespace
}  // namespace bench
}  // namespace omnistage

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Measures what the OpenAI-compatible gateway adds in front of an orchestrator.");
  absl::ParseCommandLine(argc, argv);
  return omnistage::bench::Run(argc, argv);
}
