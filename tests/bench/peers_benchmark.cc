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
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <limits>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "tests/bench/bench_processes.h"
#include "tests/bench/peer_cluster.h"
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

constexpr double kNone = std::numeric_limits<double>::quiet_NaN();  // Shown as "-".

// Figures by run: each row holds one value per column for each run.
struct Table {
  struct Row {
    std::string label;
    std::vector<std::vector<double>> runs;  // Empty for a run that failed.
  };
  Table(std::string title, std::vector<std::string> columns)
      : title(std::move(title)), columns(std::move(columns)) {}

  void Add(const std::string& label, int run, std::vector<double> values) {
    auto it =
        std::find_if(rows.begin(), rows.end(), [&](const Row& r) { return r.label == label; });
    Row& row = it != rows.end() ? *it : rows.emplace_back(Row{label, {}});
    if (static_cast<int>(row.runs.size()) <= run) row.runs.resize(run + 1);
    row.runs[run] = std::move(values);
  }

  std::string title;
  std::vector<std::string> columns;
  std::vector<Row> rows;
  std::vector<std::string> errors;
};

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

// Counts and large figures whole, the rest to two decimals; "-" for none.
std::string Number(double value) {
  if (std::isnan(value)) return "-";
  const bool whole = value == std::floor(value) || std::fabs(value) >= 100;
  return absl::StrFormat("%.*f", whole ? 0 : 2, value);
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

// The watchdog: SIGALRM past --max_seconds. The children die with the process.
void GiveUp(int) {
  static const char kMessage[] = "peers_benchmark: still running after --max_seconds; giving up\n";
  const ssize_t ignored = write(STDERR_FILENO, kMessage, sizeof(kMessage) - 1);
  (void)ignored;
  _exit(3);
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
  signal(SIGALRM, GiveUp);
  alarm(static_cast<unsigned>(absl::GetFlag(FLAGS_max_seconds)));
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
  const std::string header =
      absl::StrCat(absl::StrJoin(std::vector<std::string>(argv, argv + argc), " "), "\n",
                   absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::Now(), absl::UTCTimeZone()), ", ",
                   sysconf(_SC_NPROCESSORS_ONLN), " CPUs, loadavg at start ", LoadAverage());

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
  std::cout << header << ", at end " << LoadAverage() << "\n";
  for (const Table& t : tables) std::cout << FormatTable(t);
  std::cout << std::flush;
  if (const std::string path = absl::GetFlag(FLAGS_json); !path.empty()) {
    if (absl::Status s = WriteFile(path, JsonTables(header, tables)); !s.ok()) {
      std::cerr << "peers_benchmark: " << s.message() << "\n";
      return 1;
    }
    std::cout << "JSON written to " << path << "\n";
  }
  return 0;
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
