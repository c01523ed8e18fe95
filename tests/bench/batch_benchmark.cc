// batch_benchmark: what a large Batch API batch (docs/openai.md, "Batches")
// costs the interactive traffic beside it, and how much of the capacity that
// traffic leaves idle the batch fills.
//
// One thinker stage of --slots requests a step (a small replica, so the
// admission queue decides who runs), the gateway in front with its store.
// Each run, on a fresh pipeline:
//   1. interactive alone: for each count of --streams, that many clients
//      send streamed chat completions of --tokens tokens back to back for
//      --cell_seconds; TTFT p50/p99;
//   2. batch alone: a --lines-line batch of the same completions (not
//      streamed) is created; its lines completed over --cell_seconds give
//      the capacity it can use with nothing else running;
//   3. interactive with the batch: each cell of 1 again while the batch
//      runs on; TTFT p50/p99, and the batch's lines over the same window.
// The pipeline keeps limits.batch_reserve of the thinker's slots free of
// batch work (--batch_reserve): as many interactive clients find a slot at
// once; more wait for batch lines to end.
// The batch's share of the idle capacity: its tokens/s in 3 over what it
// could use, the replica's capacity (as many clients as it has slots) less
// the interactive tokens/s of 1, at most its tokens/s alone in 2 (its share
// of the replica).
//
//   bazel run -c opt //tests/bench:batch_benchmark -- --runs=3
//
// Clients and servers share the machine: on a small one the figures include
// the clients' own CPU. Ratios are against the same run's cells.
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "httplib.h"
#include "nlohmann/json.hpp"
#include "tests/bench/bench_processes.h"
#include "tests/bench/figures.h"
#include "tests/bench/gateway_load.h"
#include "tests/bench/run_table.h"

ABSL_FLAG(int, runs, 3, "times the three cells run; every figure is shown per run and min..max");
ABSL_FLAG(int, lines, 10000, "lines of the batch");
ABSL_FLAG(std::string, streams, "2,4",
          "interactive clients, each sending its requests back to back: one cell each");
ABSL_FLAG(int, slots, 8, "the thinker's capacity: requests in one step");
ABSL_FLAG(int, step_time_us, 2000, "the thinker's step time");
ABSL_FLAG(int, tokens, 32, "tokens (words) per request, interactive and batch alike");
ABSL_FLAG(int, batch_concurrency, 16, "the gateway's --batch_concurrency");
ABSL_FLAG(double, batch_reserve, 0.25, "the pipeline's limits.batch_reserve");
ABSL_FLAG(double, cell_seconds, 8, "how long each cell measures");
ABSL_FLAG(std::string, json, "", "also write the figures as JSON to this path");
ABSL_FLAG(int, max_seconds, 900, "the whole run is cut (exit 3) after this long");

namespace omnistage {
namespace bench {
namespace {

struct Env {
  Binaries binaries;
  std::string gateway;
  std::string dir;
  int lines = 0;
  std::vector<int> streams;
  int slots = 0;
  int step_time_us = 0;
  int tokens = 0;
  int batch_concurrency = 0;
  double batch_reserve = 0;
  absl::Duration cell;
};

// The batch's input: `lines` chat completions of `tokens` tokens.
std::string BatchInput(int lines, int tokens) {
  std::string jsonl;
  for (int i = 0; i < lines; ++i) {
    absl::StrAppend(&jsonl, R"({"custom_id": "line-)", i,
                    R"(", "method": "POST", "url": "/v1/chat/completions", "body": {"model": ")",
                    kGatewayModel, R"(", "messages": [{"role": "user", "content": "batch line )", i,
                    R"("}], "max_tokens": )", tokens, "}}\n");
  }
  return jsonl;
}

// Uploads the input and creates the batch; its id.
absl::StatusOr<std::string> CreateBatch(httplib::Client& http, const std::string& input) {
  httplib::MultipartFormDataItems form = {{"purpose", "batch", "", ""},
                                          {"file", input, "lines.jsonl", "application/jsonl"}};
  httplib::Result file = http.Post("/v1/files", form);
  if (!file || file->status != 200) {
    return absl::UnavailableError(
        absl::StrCat("upload: ", file ? file->body : httplib::to_string(file.error())));
  }
  const std::string file_id = nlohmann::json::parse(file->body)["id"];
  const std::string create = nlohmann::json{
      {"input_file_id", file_id},
      {"endpoint", "/v1/chat/completions"},
      {"completion_window",
       "24h"}}.dump();
  httplib::Result batch = http.Post("/v1/batches", create, "application/json");
  if (!batch || batch->status != 200) {
    return absl::UnavailableError(
        absl::StrCat("create: ", batch ? batch->body : httplib::to_string(batch.error())));
  }
  return nlohmann::json::parse(batch->body)["id"].get<std::string>();
}

// The batch's lines completed so far.
absl::StatusOr<int64_t> Completed(httplib::Client& http, const std::string& id) {
  httplib::Result got = http.Get(absl::StrCat("/v1/batches/", id));
  if (!got || got->status != 200) {
    return absl::UnavailableError(
        absl::StrCat("retrieve: ", got ? got->body : httplib::to_string(got.error())));
  }
  const nlohmann::json batch = nlohmann::json::parse(got->body);
  return batch["request_counts"]["completed"].get<int64_t>() +
         batch["request_counts"]["failed"].get<int64_t>();
}

SlotTotals Interactive(const Env& env, int streams, int port,
                       const std::function<void()>& on_start) {
  SlotLoad load;
  load.streams = streams;
  load.run_for = env.cell;
  load.open = [&](int) { return SseCaller(port, static_cast<uint32_t>(env.tokens)); };
  load.on_start = on_start;
  return RunSlots(load);
}

absl::Status OneRun(const Env& env, int run, Table& interactive, Table& batch) {
  GatewayStack::Options options;
  options.step_time_us = env.step_time_us;
  options.batch_size = env.slots;
  options.batch_reserve = env.batch_reserve;
  options.gateway_flags = {absl::StrCat("--batch_database=", env.dir, "/run", run, ".db"),
                           absl::StrCat("--batch_concurrency=", env.batch_concurrency)};
  absl::StatusOr<std::unique_ptr<GatewayStack>> stack =
      GatewayStack::Start(env.binaries, env.gateway, env.dir, options);
  if (!stack.ok()) return stack.status();
  const int port = (*stack)->gateway.port;
  httplib::Client http("127.0.0.1", port);
  http.set_read_timeout(std::chrono::seconds(60));

  // The replica's capacity: as many clients as it has slots.
  const SlotTotals full = Interactive(env, env.slots, port, nullptr);
  const double capacity = full.tokens_per_second();
  batch.Add(absl::StrCat("capacity (", env.slots, " interactive clients)"), run,
            {kNone, capacity, kNone});
  std::vector<SlotTotals> alone;
  for (int streams : env.streams) {
    alone.push_back(Interactive(env, streams, port, nullptr));
    if (alone.back().requests == 0) return absl::UnavailableError("no interactive request ended");
  }
  absl::StatusOr<std::string> id = CreateBatch(http, BatchInput(env.lines, env.tokens));
  if (!id.ok()) return id.status();
  // The batch alone, after its first second (the runner's first claims).
  absl::SleepFor(absl::Seconds(1));
  absl::StatusOr<int64_t> before = Completed(http, *id);
  const absl::Time from = absl::Now();
  absl::SleepFor(env.cell);
  absl::StatusOr<int64_t> after = Completed(http, *id);
  if (!before.ok() || !after.ok()) return before.ok() ? after.status() : before.status();
  const double batch_alone = (*after - *before) / absl::ToDoubleSeconds(absl::Now() - from);
  batch.Add("alone", run, {batch_alone, batch_alone * env.tokens, kNone});

  for (size_t i = 0; i < env.streams.size(); ++i) {
    const int streams = env.streams[i];
    absl::StatusOr<int64_t> beside_before = absl::UnknownError("not read");
    absl::Time beside_from;
    const SlotTotals with = Interactive(env, streams, port, [&] {
      beside_before = Completed(http, *id);
      beside_from = absl::Now();
    });
    absl::StatusOr<int64_t> beside_after = Completed(http, *id);
    if (!beside_before.ok() || !beside_after.ok()) {
      return beside_before.ok() ? beside_after.status() : beside_before.status();
    }
    if (*beside_after >= env.lines) {
      return absl::FailedPreconditionError(
          "the batch ended before the last cell did: raise --lines");
    }
    const double batch_beside =
        (*beside_after - *beside_before) / absl::ToDoubleSeconds(absl::Now() - beside_from);
    const double p50_alone = PercentileOf(alone[i].ttft_us, 0.5) / 1000;
    const double p99_alone = PercentileOf(alone[i].ttft_us, 0.99) / 1000;
    const double p50_with = PercentileOf(with.ttft_us, 0.5) / 1000;
    const double p99_with = PercentileOf(with.ttft_us, 0.99) / 1000;
    interactive.Add(absl::StrCat(streams, " clients alone"), run,
                    {p50_alone, p99_alone, 1, 1, alone[i].tokens_per_second(),
                     static_cast<double>(alone[i].failed)});
    interactive.Add(absl::StrCat(streams, " clients with the batch"), run,
                    {p50_with, p99_with, p50_with / p50_alone, p99_with / p99_alone,
                     with.tokens_per_second(), static_cast<double>(with.failed)});
    // What it could use: what the clients leave of the capacity, within its
    // share (what it does alone).
    const double idle = std::min(batch_alone * env.tokens, capacity - alone[i].tokens_per_second());
    batch.Add(absl::StrCat("beside ", streams, " clients"), run,
              {batch_beside, batch_beside * env.tokens,
               idle > 0 ? batch_beside * env.tokens / idle : kNone});
  }
  http.Post(absl::StrCat("/v1/batches/", *id, "/cancel"), "", "application/json");
  return absl::OkStatus();
}

int Run(int argc, char** argv) {
  Env env;
  env.lines = absl::GetFlag(FLAGS_lines);
  for (absl::string_view count : absl::StrSplit(absl::GetFlag(FLAGS_streams), ',')) {
    int streams = 0;
    if (!absl::SimpleAtoi(count, &streams) || streams < 1) {
      std::cerr << "batch_benchmark: --streams takes counts of 1 or more, comma-separated\n";
      return 2;
    }
    env.streams.push_back(streams);
  }
  env.slots = absl::GetFlag(FLAGS_slots);
  env.step_time_us = absl::GetFlag(FLAGS_step_time_us);
  env.tokens = absl::GetFlag(FLAGS_tokens);
  env.batch_concurrency = absl::GetFlag(FLAGS_batch_concurrency);
  env.batch_reserve = absl::GetFlag(FLAGS_batch_reserve);
  env.cell = absl::Seconds(absl::GetFlag(FLAGS_cell_seconds));
  const int runs = absl::GetFlag(FLAGS_runs);
  if (env.lines < 1 || env.slots < 1 || env.tokens < 1 || env.batch_concurrency < 1 ||
      !(env.batch_reserve >= 0 && env.batch_reserve <= 1) || env.cell <= absl::ZeroDuration() ||
      runs < 1) {
    std::cerr << "batch_benchmark: every count and --cell_seconds take more than 0\n";
    return 2;
  }
  StartWatchdog("batch_benchmark", absl::GetFlag(FLAGS_max_seconds));
  absl::StatusOr<GatewayBinaries> found = FindGatewayBinaries(argv[0]);
  if (!found.ok()) {
    std::cerr << "batch_benchmark: " << found.status().message() << "\n";
    return 2;
  }
  env.binaries = found->binaries;
  env.gateway = found->gateway;
  env.dir = found->dir->path();
  const std::string header = RunHeader(argc, argv);
  Table interactive(
      absl::StrCat("interactive: N clients of streamed ", env.tokens,
                   "-token chat completions back to back for ", absl::FormatDuration(env.cell),
                   ", on one thinker of ", env.slots, " slots (", env.step_time_us,
                   " us a step, batch_reserve ", env.batch_reserve, "), alone and beside a ",
                   env.lines, "-line batch (--batch_concurrency=", env.batch_concurrency,
                   "); TTFT in ms"),
      {"TTFT p50", "TTFT p99", "x p50 alone", "x p99 alone", "tok/s", "failed"});
  Table batch(absl::StrCat("the batch: its lines completed per second alone and beside the "
                           "interactive clients; share: its tok/s beside them over the idle "
                           "capacity it could use (the capacity less the clients' tok/s, at "
                           "most what it does alone)"),
              {"lines/s", "tok/s", "share of idle"});
  for (int run = 0; run < runs; ++run) {
    std::fprintf(stderr, "batch_benchmark: run %d/%d\n", run + 1, runs);
    if (absl::Status s = OneRun(env, run, interactive, batch); !s.ok()) {
      interactive.errors.push_back(absl::StrCat("run ", run + 1, ": ", s.message()));
    }
  }
  return PrintTables("batch_benchmark", header, {interactive, batch}, absl::GetFlag(FLAGS_json));
}

}  // namespace
}  // namespace bench
}  // namespace omnistage

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Measures interactive TTFT beside a large Batch API batch, and the batch's share of the "
      "capacity left idle.");
  absl::ParseCommandLine(argc, argv);
  return omnistage::bench::Run(argc, argv);
}
