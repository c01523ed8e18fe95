// admission_benchmark: what the orchestrator's admission queue changes for a
// client, with the queue off (limits.max_queued: 0) and on, in the same run,
// each figure per run and as the spread (min..max) over --runs runs. No
// targets, no verdicts.
//
//   bazel run -c opt //tests/bench:admission_benchmark -- --runs=3
//
//   fairness  one stage-0 replica with 8 batch slots and 10 ms steps; one
//             identity sends 64 requests of 60 steps at once, another sends
//             10 short requests (2 steps) one after another once the flood
//             runs: the quiet identity's time to first output (p50, p90,
//             max), the flood's wall time alone and beside the quiet one.
//   light     one client, short requests (1 step of 0 ms) one after another,
//             far below saturation (the queue never holds one): latency p50
//             and p99, and the orchestrator's CPU per request (/proc).
//
// Real processes on 127.0.0.1 (the test harness's stage workers and
// orchestrator), stopped by PID. See docs/benchmarks.md.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "tests/bench/bench_processes.h"
#include "tests/pipeline_harness.h"

ABSL_FLAG(int, runs, 3, "times each mode runs; figures per run and as min..max");
ABSL_FLAG(int, light_requests, 300, "requests of the light-load row");

namespace omnistage {
namespace bench {
namespace {

constexpr char kFlood[] = "flood-token-0123456789";
constexpr char kQuiet[] = "quiet-token-0123456789";
constexpr int kFloodRequests = 64;
constexpr uint32_t kLongTokens = 60;
constexpr int kQuietRequests = 10;

struct Figures {
  double quiet_p50_ms = 0, quiet_p90_ms = 0, quiet_max_ms = 0;
  double flood_alone_s = 0, flood_beside_s = 0;
  double light_p50_us = 0, light_p99_us = 0, cpu_per_request_us = 0;
  int failed = 0;
};

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

std::unique_ptr<PipelineHarness> Start(const std::string& dir, const std::string& engine_params,
                                       bool queue) {
  const std::string tokens = dir + "/tokens.yaml";
  std::ofstream(tokens) << "tokens:\n  - identity: flood\n    role: user\n    token: \"" << kFlood
                        << "\"\n  - identity: quiet\n    role: admin\n    token: \"" << kQuiet
                        << "\"\n";
  StageSpec llm;
  llm.name = "llm";
  llm.engine = "sim_llm";
  llm.engine_params = engine_params;
  llm.replicas = 1;
  llm.final_output = true;
  llm.output_modality = "tokens";
  PipelineSpec spec;
  spec.stages = {llm};
  spec.orchestrator_flags = {"--tokens_file=" + tokens, "--log_level=warning"};
  spec.token = kQuiet;
  if (!queue) spec.limits = {"max_queued: 0"};
  absl::StatusOr<std::unique_ptr<PipelineHarness>> pipeline = PipelineHarness::Start(spec);
  if (!pipeline.ok()) {
    std::cerr << "cannot start the pipeline: " << pipeline.status() << "\n";
    return nullptr;
  }
  return *std::move(pipeline);
}

std::unique_ptr<GenerateCall> Call(PipelineHarness& pipeline, const std::string& id,
                                   uint32_t tokens, const std::string& token) {
  return std::make_unique<GenerateCall>(
      pipeline.stub(), MakeRequest(id, "hello", {StageParams(0, tokens)}), absl::Seconds(120),
      token);
}

// Waits for `calls`; counts those that did not end whole.
int WaitAll(std::vector<std::unique_ptr<GenerateCall>>& calls) {
  int failed = 0;
  for (auto& call : calls) {
    GenerateResult r = call->Wait(absl::Seconds(120));
    failed += !r.status.ok() || r.terminals != 1 ||
              r.terminal.finish_reason() != v1::FINISH_REASON_LENGTH;
  }
  return failed;
}

void Fairness(PipelineHarness& pipeline, const std::string& tag, Figures* f) {
  // The flood alone.
  absl::Time start = absl::Now();
  std::vector<std::unique_ptr<GenerateCall>> flood;
  for (int i = 0; i < kFloodRequests; ++i) {
    flood.push_back(Call(pipeline, absl::StrCat(tag, "-alone-", i), kLongTokens, kFlood));
  }
  f->failed += WaitAll(flood);
  f->flood_alone_s = absl::ToDoubleSeconds(absl::Now() - start);
  // The flood beside a quiet identity.
  flood.clear();
  start = absl::Now();
  for (int i = 0; i < kFloodRequests; ++i) {
    flood.push_back(Call(pipeline, absl::StrCat(tag, "-flood-", i), kLongTokens, kFlood));
  }
  flood[0]->WaitForOutput(absl::Seconds(30));
  std::vector<double> waits_ms;
  for (int i = 0; i < kQuietRequests; ++i) {
    const absl::Time asked = absl::Now();
    std::unique_ptr<GenerateCall> quiet =
        Call(pipeline, absl::StrCat(tag, "-quiet-", i), 2, kQuiet);
    quiet->WaitForOutput(absl::Seconds(60));
    waits_ms.push_back(absl::ToDoubleMilliseconds(absl::Now() - asked));
    std::vector<std::unique_ptr<GenerateCall>> one;
    one.push_back(std::move(quiet));
    f->failed += WaitAll(one);
  }
  f->failed += WaitAll(flood);
  f->flood_beside_s = absl::ToDoubleSeconds(absl::Now() - start);
  f->quiet_p50_ms = Percentile(waits_ms, 0.5);
  f->quiet_p90_ms = Percentile(waits_ms, 0.9);
  f->quiet_max_ms = Percentile(waits_ms, 1.0);
}

void Light(PipelineHarness& pipeline, const std::string& tag, int requests, Figures* f) {
  const pid_t orchestrator = pipeline.orchestrator()->pid();
  absl::StatusOr<ProcessCpu> before = ReadProcessCpu(orchestrator);
  std::vector<double> latency_us;
  for (int i = 0; i < requests; ++i) {
    const absl::Time start = absl::Now();
    std::unique_ptr<GenerateCall> call = Call(pipeline, absl::StrCat(tag, "-light-", i), 1, kQuiet);
    std::vector<std::unique_ptr<GenerateCall>> one;
    one.push_back(std::move(call));
    f->failed += WaitAll(one);
    latency_us.push_back(absl::ToDoubleMicroseconds(absl::Now() - start));
  }
  absl::StatusOr<ProcessCpu> after = ReadProcessCpu(orchestrator);
  f->light_p50_us = Percentile(latency_us, 0.5);
  f->light_p99_us = Percentile(latency_us, 0.99);
  if (before.ok() && after.ok()) {
    f->cpu_per_request_us =
        static_cast<double>(after->sched_ns - before->sched_ns) / 1000.0 / requests;
  }
}

// Each run's value with `decimals` digits, then (min..max).
std::string Spread(const std::vector<Figures>& runs, double Figures::*field, int decimals) {
  std::string per_run;
  double lo = 1e300, hi = -1e300;
  for (const Figures& f : runs) {
    absl::StrAppend(&per_run, per_run.empty() ? "" : " ",
                    absl::StrFormat("%.*f", decimals, f.*field));
    lo = std::min(lo, f.*field);
    hi = std::max(hi, f.*field);
  }
  return absl::StrCat(per_run, "  (", absl::StrFormat("%.*f", decimals, lo), "..",
                      absl::StrFormat("%.*f", decimals, hi), ")");
}

int Run(const std::string& dir) {
  const int runs = std::max(1, absl::GetFlag(FLAGS_runs));
  std::map<bool, std::vector<Figures>> figures;
  for (int run = 0; run < runs; ++run) {
    for (bool queue : {false, true}) {
      const std::string tag = absl::StrCat(queue ? "on" : "off", run);
      Figures f;
      {
        std::unique_ptr<PipelineHarness> pipeline =
            Start(dir, "step_time_us=10000,batch_size=8", queue);
        if (pipeline == nullptr) return 1;
        Fairness(*pipeline, tag, &f);
      }
      {
        std::unique_ptr<PipelineHarness> pipeline =
            Start(dir, "step_time_us=0,batch_size=8", queue);
        if (pipeline == nullptr) return 1;
        Light(*pipeline, tag, absl::GetFlag(FLAGS_light_requests), &f);
      }
      std::cerr << "run " << run + 1 << " queue " << (queue ? "on" : "off") << " done\n";
      figures[queue].push_back(f);
    }
  }
  std::cout << "# Admission queue, off (limits.max_queued: 0) and on, " << runs
            << " run(s): per run, then (min..max)\n\n";
  for (bool queue : {false, true}) {
    const std::vector<Figures>& r = figures[queue];
    int failed = 0;
    for (const Figures& f : r) failed += f.failed;
    std::cout << "queue " << (queue ? "on" : "off") << ":\n"
              << "  quiet TTFT p50 ms       " << Spread(r, &Figures::quiet_p50_ms, 0) << "\n"
              << "  quiet TTFT p90 ms       " << Spread(r, &Figures::quiet_p90_ms, 0) << "\n"
              << "  quiet TTFT max ms       " << Spread(r, &Figures::quiet_max_ms, 0) << "\n"
              << "  flood alone s           " << Spread(r, &Figures::flood_alone_s, 2) << "\n"
              << "  flood beside quiet s    " << Spread(r, &Figures::flood_beside_s, 2)
              << "\n"
              << "  light latency p50 us    " << Spread(r, &Figures::light_p50_us, 0) << "\n"
              << "  light latency p99 us    " << Spread(r, &Figures::light_p99_us, 0) << "\n"
              << "  orch CPU per request us " << Spread(r, &Figures::cpu_per_request_us, 0)
              << "\n"
              << "  requests not ended whole: " << failed << "\n";
  }
  return 0;
}

}  // namespace
}  // namespace bench
}  // namespace omnistage

int main(int argc, char** argv) {
  return omnistage::bench::RunInScratchDir(argc, argv, omnistage::bench::Run);
}
