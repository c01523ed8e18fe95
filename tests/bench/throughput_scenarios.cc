// Throughput and light-load scenarios: the same load against the baseline
// server, nginx in front of it, and orchestrators with 1 and 3 stages.
#include <unistd.h>

#include <cstdio>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "tests/bench/scenarios.h"
#include "tests/bench/targets.h"

namespace omnistage {
namespace bench {
namespace {

constexpr uint32_t kUpstreamTokens = 8;

}  // namespace

Figures Summarize(const LoadResult& result) {
  Figures f;
  f.requests = result.requests;
  f.failed = result.failed;
  f.tokens = result.tokens;
  f.messages = result.messages;
  f.seconds = result.seconds;
  f.tokens_per_s = result.tokens_per_second();
  f.ttft_p50_us = Percentile(result.ttft_us, 50);
  f.ttft_p99_us = Percentile(result.ttft_us, 99);
  f.gap_p50_us = Percentile(result.gap_us, 50);
  f.gap_p99_us = Percentile(result.gap_us, 99);
  f.one_way_p50_us = Percentile(result.one_way_us, 50);
  f.one_way_p99_us = Percentile(result.one_way_us, 99);
  double sum = 0;
  for (double gap : result.gap_us) sum += gap;
  f.gap_mean_us = result.gap_us.empty() ? 0 : sum / result.gap_us.size();
  if (result.failed != 0) {
    f.error = absl::StrCat(result.failed, " of ", result.requests,
                           " requests failed; first: ", result.first_error);
  }
  return f;
}

v1::GenerateRequest OrchestratorRequest(const std::string& request_id, int stages, uint32_t tokens,
                                        int64_t seq) {
  v1::GenerateRequest request;
  request.set_request_id(request_id);
  request.set_prompt(absl::StrCat("benchmark prompt ", seq));
  for (int s = 0; s < stages; ++s) {
    v1::StageParameters* params = request.add_stage_params();
    params->set_stage_id(s);
    params->set_max_tokens(s == stages - 1 ? tokens : kUpstreamTokens);
  }
  return request;
}

bool WaitPipelineAlive(v1::Orchestrator::Stub* stub, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(2)));
    v1::PipelineStatus status;
    bool alive = stub->GetPipelineStatus(&context, {}, &status).ok() && status.stages_size() > 0;
    for (const v1::StageStatus& stage : status.stages()) {
      for (const v1::ReplicaStatus& replica : stage.replicas()) alive = alive && replica.alive();
    }
    if (alive) return true;
    if (absl::Now() >= deadline) return false;
    absl::SleepFor(absl::Milliseconds(20));
  }
}

Figures RunLoad(const std::shared_ptr<v1::Orchestrator::Stub>& stub, int streams,
                absl::Duration run_for, const RequestFactory& make_request, absl::Duration limit) {
  LoadOptions options;
  options.streams = streams;
  options.run_for = run_for;
  options.make_request = make_request;
  StreamGroup group(stub, options);
  group.Start();
  const bool finished = group.WaitDone(limit);
  if (!finished) {
    group.CancelAll();
    group.WaitDone(absl::Seconds(20));
  }
  Figures figures = Summarize(group.Result());
  if (!finished) {
    figures.error = absl::StrCat("cut after ", absl::FormatDuration(limit),
                                 figures.error.empty() ? "" : "; ", figures.error);
  }
  return figures;
}

std::vector<ThroughputCell> RunThroughput(const BenchOptions& options, BenchEnv& env) {
  std::vector<ThroughputCell> cells;
  for (int64_t step_time_us : options.step_times_us) {
    std::map<std::pair<std::string, int>, double> tokens_per_s;
    const size_t first = cells.size();
    for (const std::string& row : options.rows) {
      std::fprintf(stderr, "throughput: %s, step %lld us\n", row.c_str(),
                   static_cast<long long>(step_time_us));
      std::unique_ptr<Target> target = OpenTarget(row, step_time_us, options.tokens, options.stamp_throughput, env);
      std::shared_ptr<v1::Orchestrator::Stub> stub;
      if (target->error.empty()) stub = Warm(*target);
      for (int streams : options.streams) {
        ThroughputCell& cell = cells.emplace_back();
        cell.row = row;
        cell.step_time_us = step_time_us;
        cell.streams = streams;
        if (stub == nullptr) {
          cell.figures.error = target->error;
          continue;
        }
        // Generous: a paced stream takes tokens x step time, and 4096 of them
        // share two cores with the servers.
        const absl::Duration limit = options.cell_time + absl::Seconds(60) +
                                     absl::Microseconds(step_time_us) * options.tokens * 4;
        const std::vector<pid_t> serving = ServingPids(row, *target, env);
        const std::vector<pid_t> back(serving.begin() + 1, serving.end());
        const ProcessCpu client_before = Cpu({getpid()});
        const ProcessCpu front_before = Cpu({serving.front()});
        const ProcessCpu back_before = Cpu(back);
        PeakRss rss(serving, absl::Milliseconds(50));
        cell.figures = RunLoad(stub, streams, options.cell_time, target->make_request, limit);
        if (cell.figures.tokens > 0) {
          const double tokens = static_cast<double>(cell.figures.tokens);
          const ProcessCpu front = Cpu({serving.front()});
          const ProcessCpu rest = Cpu(back);
          cell.client_cpu_us_per_token = (Cpu({getpid()}).sched_ns - client_before.sched_ns) / 1e3 / tokens;
          cell.front_cpu_us_per_token = (front.sched_ns - front_before.sched_ns) / 1e3 / tokens;
          cell.back_cpu_us_per_token = (rest.sched_ns - back_before.sched_ns) / 1e3 / tokens;
          cell.server_cpu_us_per_token = cell.front_cpu_us_per_token + cell.back_cpu_us_per_token;
          cell.front_runs_per_token = (front.runs - front_before.runs) / tokens;
          cell.back_runs_per_token = (rest.runs - back_before.runs) / tokens;
        }
        const std::vector<int64_t> peaks = rss.Stop();
        cell.front_peak_rss_kib = peaks.front();
        for (size_t i = 1; i < peaks.size(); ++i) cell.back_peak_rss_kib += peaks[i];
        tokens_per_s[{row, streams}] = cell.figures.tokens_per_s;
        std::fprintf(stderr, "  %5d streams: %10.0f tokens/s %s\n", streams,
                     cell.figures.tokens_per_s, cell.figures.error.c_str());
        absl::SleepFor(absl::Milliseconds(200));  // Let the servers settle between cells.
      }
    }
    for (size_t i = first; i < cells.size(); ++i) {
      ThroughputCell& cell = cells[i];
      auto baseline = tokens_per_s.find({"baseline", cell.streams});
      auto nginx = tokens_per_s.find({"nginx", cell.streams});
      if (baseline != tokens_per_s.end() && baseline->second > 0) {
        cell.ratio_to_baseline = cell.figures.tokens_per_s / baseline->second;
      }
      if (nginx != tokens_per_s.end() && nginx->second > 0) {
        cell.ratio_to_nginx = cell.figures.tokens_per_s / nginx->second;
      }
    }
  }
  return cells;
}

LightLoad RunLightLoad(const BenchOptions& options, BenchEnv& env) {
  LightLoad light;
  light.pace_us = options.light_pace_us;
  for (const std::string row : {"baseline", "nginx", "haproxy", "relay-cb", "relay-async",
                                "relay-async2", "orch1"}) {
    std::fprintf(stderr, "light load: %s\n", row.c_str());
    LightRow& result = light.rows.emplace_back();
    result.row = row;
    std::unique_ptr<Target> target = OpenTarget(row, options.light_pace_us, options.tokens, /*stamp=*/true, env);
    std::shared_ptr<v1::Orchestrator::Stub> stub;
    if (target->error.empty()) stub = Warm(*target);
    if (stub == nullptr) {
      result.figures.error = target->error;
      continue;
    }
    const pid_t front = ServingPids(row, *target, env).front();
    const ProcessCpu before = Cpu({front});
    result.figures = RunLoad(stub, 1, options.light_time, target->make_request,
                             options.light_time + absl::Seconds(60));
    if (result.figures.tokens > 0) {
      const ProcessCpu after = Cpu({front});
      const double tokens = static_cast<double>(result.figures.tokens);
      result.front_cpu_us_per_token = (after.sched_ns - before.sched_ns) / 1e3 / tokens;
      result.front_runs_per_token = (after.runs - before.runs) / tokens;
    }
  }
  return light;
}

}  // namespace bench
}  // namespace omnistage
