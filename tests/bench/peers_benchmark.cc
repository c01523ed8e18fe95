// peers_benchmark: what several orchestrators sharing the same stage workers
// (peers: in the config) change for a client, each figure measured per run and
// as the spread (min..max) over --runs runs. No targets, no verdicts.
//
//   bazel build -c opt //tests/bench:peers_benchmark
//   bazel-bin/tests/bench/peers_benchmark --runs=3 --json=/tmp/peers.json
//   bazel run -c opt //tests/bench:peers_benchmark -- --runs=1 --scenarios=pick
//
//   throughput  2 workers, 64 streams of 200-token requests back to back: one
//               orchestrator alone with all 64, then three peers with 22/21/21
//               (tokens summed); tokens/s, 3/1 ratio, TTFT, failures.
//   abort       2 workers (1 ms steps), three peers, 64 long requests in flight
//               through orchestrator 0 (63 held, plus a fresh victim per abort
//               once it streams); the aborts go alternately to orchestrator 0
//               (the owner) and 1 (forwarded: the generated id names the owner,
//               one peer call): Abort RPC and abort -> terminal ABORT latency.
//   pick        4 workers of capacity 4 (5 ms steps), three peers with 4
//               streams each, every fifth request 300 tokens, the rest 10:
//               pick: round_robin, then least_loaded on the same workers; TTFT.
//
// The program starts its workers itself (--listen=127.0.0.1:0) and orchestrators
// that reach them by `addresses:`; everything listens on 127.0.0.1. Every
// process is stopped by PID, also on failure, and dies with the program; the
// whole run is bounded by --max_seconds. See docs/benchmarks.md.
#include <algorithm>
#include <cstdio>
#include <iostream>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "tests/bench/bench_processes.h"
#include "tests/bench/peer_cluster.h"
#include "tests/bench/run_table.h"
#include "tests/bench/scenarios.h"

ABSL_FLAG(std::string, scenarios, "throughput,abort,pick", "which of throughput, abort, pick");
ABSL_FLAG(int, runs, 3, "times each scenario runs; every figure is shown per run and as min..max");
ABSL_FLAG(double, cell_seconds, 3, "throughput cells run this long, pick runs twice as long");
ABSL_FLAG(int, aborts, 100, "aborts per run, alternately through the owner and a non-owner");
ABSL_FLAG(std::string, json, "", "also write the figures as JSON to this path");
ABSL_FLAG(int, max_seconds, 900, "the whole run is cut (exit 3) after this long");

namespace omnistage {
namespace bench {
namespace {

struct Env {
  Binaries binaries;
  std::string dir;
  absl::Duration cell;
  int aborts = 0;
};

RequestFactory Tokens(uint32_t tokens) {
  return [tokens](int, int64_t seq) { return OrchestratorRequest("", 1, tokens, seq); };
}

absl::StatusOr<std::unique_ptr<PeerCluster>> OpenCluster(const Env& env, const WorkerSet& workers,
                                                         int orchestrators,
                                                         const std::string& pick) {
  ClusterOptions options;
  options.orchestrators = orchestrators;
  options.pick = pick;
  return PeerCluster::Start(env.binaries, env.dir, workers.ports(), options);
}

absl::Status ThroughputAt(const Env& env, int64_t step_time_us, int run, Table& table) {
  absl::StatusOr<std::unique_ptr<WorkerSet>> workers =
      WorkerSet::Start(env.binaries, 2, 4096, step_time_us);
  if (!workers.ok()) return workers.status();
  double one_orchestrator = 0;
  for (const std::vector<int>& split : {std::vector<int>{64}, std::vector<int>{22, 21, 21}}) {
    const int n = static_cast<int>(split.size());
    absl::StatusOr<std::unique_ptr<PeerCluster>> cluster =
        OpenCluster(env, **workers, n, "round_robin");
    if (!cluster.ok()) return cluster.status();
    const SplitLoad load =
        RunSplit(**cluster, split, env.cell, Tokens(200), env.cell + absl::Minutes(2));
    if (!load.error.empty()) return absl::DeadlineExceededError(load.error);
    const Figures f = Summarize(load.result);
    if (n == 1) one_orchestrator = f.tokens_per_s;
    table.Add(
        absl::StrCat("step ", step_time_us, " us, ", n, " orch x", absl::StrJoin(split, "/")), run,
        {f.tokens_per_s, n == 1 ? kNone : f.tokens_per_s / one_orchestrator, f.ttft_p50_us / 1e3,
         f.ttft_p99_us / 1e3, static_cast<double>(f.requests), static_cast<double>(f.failed)});
  }
  return absl::OkStatus();
}

absl::Status Throughput(const Env& env, int run, Table& table) {
  for (const int64_t step_time_us : {0, 10000}) {
    if (absl::Status s = ThroughputAt(env, step_time_us, run, table); !s.ok()) {
      return absl::Status(s.code(), absl::StrCat("step ", step_time_us, " us: ", s.message()));
    }
  }
  return absl::OkStatus();
}

absl::Status Abort(const Env& env, int run, Table& table) {
  absl::StatusOr<std::unique_ptr<WorkerSet>> workers =
      WorkerSet::Start(env.binaries, 2, 4096, 1000);
  if (!workers.ok()) return workers.status();
  absl::StatusOr<std::unique_ptr<PeerCluster>> cluster =
      OpenCluster(env, **workers, 3, "round_robin");
  if (!cluster.ok()) return cluster.status();
  const PeerCluster& peers = **cluster;
  // 63 streaming + the victim of the moment: every abort meets 64 in flight.
  LoadOptions load;
  load.streams = 63;
  load.run_for = absl::Hours(1);  // Replaced if one ever ends.
  load.make_request = Tokens(kLongTokens);
  StreamGroup background(peers.stub(0), load);
  background.Start();
  if (!background.WaitAllHaveTokens(absl::Seconds(30))) {
    return absl::DeadlineExceededError("not every background request had a token within 30 s");
  }
  struct Side {
    int not_aborted = 0;
    Latencies rpc;       // Abort RPC send -> its response.
    Latencies terminal;  // Abort RPC send -> terminal ABORT on the stream.
  } sides[2];
  for (int n = 0; n < env.aborts; ++n) {
    const int via = n % 2;  // Alternating, so that drift in the machine's load hits both.
    StreamingRequest victim(peers.stub(0).get(), OrchestratorRequest("", 1, kLongTokens, n));
    const std::string id = victim.WaitStreaming(absl::Seconds(30));
    if (id.empty()) return absl::DeadlineExceededError(absl::StrCat("victim ", n, " had no token"));
    if (!peers.node_id(0).empty() && !absl::EndsWith(id, "." + peers.node_id(0))) {
      return absl::InternalError(absl::StrCat(id, " does not name orchestrator 0 as its owner"));
    }
    v1::AbortRequest request;
    request.add_request_ids(id);
    v1::AbortResponse response;
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
    const int64_t sent = NowNs();
    const grpc::Status status = peers.stub(via)->Abort(&context, request, &response);
    const int64_t answered = NowNs();
    if (!status.ok())
      return absl::UnavailableError(absl::StrCat("Abort(", id, "): ", status.error_message()));
    Side& side = sides[via];
    if (response.results_size() != 1 ||
        response.results(0).outcome() != v1::AbortResult::OUTCOME_ABORTED) {
      ++side.not_aborted;  // Its stream goes on; the victim's destructor cancels it.
      continue;
    }
    if (!victim.WaitEnded(absl::Seconds(10))) {
      return absl::DeadlineExceededError(absl::StrCat(id, " did not end within 10 s of its abort"));
    }
    if (victim.finish_reason() != v1::FINISH_REASON_ABORT) {
      ++side.not_aborted;
      continue;
    }
    side.rpc.us.push_back((answered - sent) / 1e3);
    side.terminal.us.push_back((victim.terminal_ns() - sent) / 1e3);
  }
  for (int via = 0; via < 2; ++via) {
    const Side& s = sides[via];
    table.Add(via == 0 ? "via orchestrator 0 (owner)" : "via orchestrator 1 (forwarded)", run,
              {static_cast<double>(s.rpc.us.size()), static_cast<double>(s.not_aborted),
               s.rpc.p50(), s.rpc.p99(), s.terminal.p50(), s.terminal.p99()});
  }
  return absl::OkStatus();
}

absl::Status Pick(const Env& env, int run, Table& table) {
  absl::StatusOr<std::unique_ptr<WorkerSet>> workers = WorkerSet::Start(env.binaries, 4, 4, 5000);
  if (!workers.ok()) return workers.status();
  // Uneven lengths, so that where the long ones land decides who queues.
  const RequestFactory request = [](int, int64_t seq) {
    return OrchestratorRequest("", 1, seq % 5 == 0 ? 300 : 10, seq);
  };
  double round_robin_p99 = 0;
  for (const std::string pick : {"round_robin", "least_loaded"}) {
    // The workers stay; only the orchestrators (and `pick:`) change.
    absl::StatusOr<std::unique_ptr<PeerCluster>> cluster = OpenCluster(env, **workers, 3, pick);
    if (!cluster.ok()) return cluster.status();
    const SplitLoad load =
        RunSplit(**cluster, {4, 4, 4}, env.cell * 2, request, env.cell * 2 + absl::Minutes(2));
    if (!load.error.empty()) return absl::DeadlineExceededError(load.error);
    const Figures f = Summarize(load.result);
    if (pick == "round_robin") round_robin_p99 = f.ttft_p99_us;
    table.Add(
        pick, run,
        {f.ttft_p50_us / 1e3, f.ttft_p99_us / 1e3, Percentile(load.result.ttft_us, 100) / 1e3,
         pick == "round_robin" || round_robin_p99 == 0 ? kNone : f.ttft_p99_us / round_robin_p99,
         f.tokens_per_s, static_cast<double>(f.requests), static_cast<double>(f.failed)});
  }
  return absl::OkStatus();
}

int Run(int argc, char** argv) {
  const std::vector<std::string> scenarios =
      absl::StrSplit(absl::GetFlag(FLAGS_scenarios), ',', absl::SkipEmpty());
  for (const std::string& s : scenarios) {
    if (s != "throughput" && s != "abort" && s != "pick") {
      std::cerr << "peers_benchmark: --scenarios: unknown scenario '" << s << "'\n";
      return 2;
    }
  }
  auto wants = [&](const std::string& name) {
    return std::find(scenarios.begin(), scenarios.end(), name) != scenarios.end();
  };
  const int runs = absl::GetFlag(FLAGS_runs);
  StartWatchdog("peers_benchmark", absl::GetFlag(FLAGS_max_seconds));
  Env env;
  env.cell = absl::Seconds(absl::GetFlag(FLAGS_cell_seconds));
  env.aborts = absl::GetFlag(FLAGS_aborts);
  absl::StatusOr<Binaries> binaries = FindBinaries(argv[0]);
  absl::StatusOr<std::unique_ptr<TempDir>> dir = TempDir::Create();
  if (!binaries.ok() || !dir.ok()) {
    std::cerr << "peers_benchmark: " << (binaries.ok() ? dir.status() : binaries.status()).message()
              << "\n";
    return 2;
  }
  env.binaries = *binaries;
  env.dir = (*dir)->path();
  const std::string header = RunHeader(argc, argv);

  const std::string cell = absl::FormatDuration(env.cell);
  const std::string pick_time = absl::FormatDuration(env.cell * 2);
  struct Scenario {
    std::string name;
    Table table;
    absl::Status (*run)(const Env&, int, Table&);
  };
  std::vector<Scenario> all = {
      {"throughput",
       Table(absl::StrCat("throughput: 2 workers (capacity 4096), 64 streams of 200 tokens back "
                          "to back for ",
                          cell, "; 3 orch: peers sharing the workers, summed"),
             {"tok/s", "x 1-orch", "TTFT p50 ms", "TTFT p99 ms", "requests", "failed"}),
       Throughput},
      {"abort",
       Table(absl::StrCat("abort: 2 workers (1 ms steps), 3 peers, 64 requests in flight through "
                          "orchestrator 0, ",
                          env.aborts, " aborts alternating; latencies in us"),
             {"aborted", "not ABORTED", "RPC p50", "RPC p99", "terminal p50", "terminal p99"}),
       Abort},
      {"pick",
       Table(absl::StrCat("pick: 4 workers (capacity 4, 5 ms steps), 3 peers x 4 streams for ",
                          pick_time, ", every 5th request 300 tokens, the others 10"),
             {"TTFT p50 ms", "TTFT p99 ms", "TTFT max ms", "p99 x rr", "tok/s", "requests",
              "failed"}),
       Pick},
  };
  for (int run = 0; run < runs; ++run) {
    for (Scenario& s : all) {
      if (!wants(s.name)) continue;
      std::fprintf(stderr, "peers_benchmark: run %d/%d: %s\n", run + 1, runs, s.name.c_str());
      if (absl::Status status = s.run(env, run, s.table); !status.ok()) {
        s.table.errors.push_back(absl::StrCat("run ", run + 1, ": ", status.message()));
      }
    }
  }
  std::vector<Table> tables;
  for (const Scenario& s : all) {
    if (wants(s.name)) tables.push_back(s.table);
  }
  return PrintTables("peers_benchmark", header, tables, absl::GetFlag(FLAGS_json));
}

}  // namespace
}  // namespace bench
}  // namespace omnistage

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Measures orchestrators sharing stage workers as peers; see docs/benchmarks.md.");
  absl::ParseCommandLine(argc, argv);
  return omnistage::bench::Run(argc, argv);
}
