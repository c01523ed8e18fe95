#include "tests/bench/failover_scenarios.h"

#include <signal.h>

#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "tests/bench/bench_processes.h"
#include "tests/bench/load_generator.h"
#include "tests/pipeline_harness.h"

namespace omnistage {
namespace bench {
namespace {

constexpr int kVictim = 1;
// Tokens a victim's stream still receives after the kill that were on their
// way before it: not resumed output. The replay of `kill_after_tokens` steps
// takes far longer than this.
constexpr absl::Duration kInTransit = absl::Milliseconds(50);

StageSpec SimStage(const std::string& name, const std::string& params, int replicas,
                   bool final_output) {
  StageSpec stage;
  stage.name = name;
  stage.engine = "sim_llm";
  stage.engine_params = params;
  stage.replicas = replicas;
  stage.final_output = final_output;
  stage.output_modality = "tokens";
  return stage;
}

std::unique_ptr<PipelineHarness> Start(PipelineSpec spec) {
  spec.orchestrator_flags.push_back("--log_level=warning");
  absl::StatusOr<std::unique_ptr<PipelineHarness>> pipeline = PipelineHarness::Start(spec);
  if (!pipeline.ok()) {
    std::cerr << "cannot start the pipeline: " << pipeline.status() << "\n";
    return nullptr;
  }
  return *std::move(pipeline);
}

v1::GenerateRequest Request(const std::string& id, int n, std::vector<uint32_t> tokens) {
  std::vector<v1::StageParameters> params;
  for (size_t s = 0; s < tokens.size(); ++s) {
    params.push_back(StageParams(static_cast<int>(s), tokens[s]));
    params.back().set_seed(1000 + n);
  }
  return MakeRequest(id, absl::StrCat("prompt ", n), std::move(params));
}

// Starts `n` endless requests one by one, each bound before the next starts;
// the replica of stage 0 each went to, from the orchestrator's status (-1: not
// seen).
std::vector<int> StartPlaced(PipelineHarness& pipeline, int n,
                             std::vector<std::unique_ptr<GenerateCall>>* calls) {
  std::vector<int> bound(pipeline.replicas(0), 0);
  std::vector<int> replica_of;
  for (int i = 0; i < n; ++i) {
    calls->push_back(pipeline.StartGenerate(Request(absl::StrCat("resume-", i), i, {1000000}),
                                            absl::Seconds(600)));
    std::vector<int> now = bound;
    Eventually(
        [&] {
          absl::StatusOr<v1::PipelineStatus> status = pipeline.Status();
          if (!status.ok()) return false;
          int total = 0;
          for (int r = 0; r < pipeline.replicas(0); ++r) {
            now[r] = status->stages(0).replicas(r).bound_requests();
            total += now[r];
          }
          return total == i + 1;
        },
        absl::Seconds(20), absl::Milliseconds(5));
    replica_of.push_back(-1);
    for (int r = 0; r < pipeline.replicas(0); ++r) {
      if (now[r] > bound[r]) replica_of.back() = r;
    }
    bound = now;
  }
  return replica_of;
}

double MillisSince(absl::Time t) { return absl::ToDoubleMilliseconds(absl::Now() - t); }

}  // namespace

ResumeFigures MeasureResume(const ResumeOptions& options) {
  ResumeFigures figures;
  PipelineSpec spec;
  spec.name = "resume";
  StageSpec llm = SimStage(
      "llm", absl::StrCat("batch_size=256,step_time_us=", options.step_time_us), 2, true);
  llm.failover_max_attempts = options.failover ? 3 : 0;
  spec.stages = {llm};
  std::unique_ptr<PipelineHarness> pipeline = Start(spec);
  if (pipeline == nullptr) return figures;

  std::vector<std::unique_ptr<GenerateCall>> calls;
  const std::vector<int> replica_of = StartPlaced(*pipeline, options.in_flight, &calls);
  const size_t k = static_cast<size_t>(options.kill_after_tokens);
  for (auto& call : calls) {
    call->WaitUntil([&](const GenerateResult& r) { return r.tokens.size() >= k; },
                    absl::Seconds(120));
  }
  std::vector<size_t> at_kill;
  for (auto& call : calls) at_kill.push_back(call->Snapshot().tokens.size());
  const absl::Time killed = absl::Now();
  pipeline->worker_process(0, kVictim)->Signal(SIGKILL);
  absl::SleepFor(kInTransit);
  for (size_t i = 0; i < calls.size(); ++i) {
    if (replica_of[i] == kVictim) at_kill[i] = calls[i]->Snapshot().tokens.size();
  }

  std::vector<double> ms(calls.size(), -1);
  std::vector<std::thread> waiters;
  for (size_t i = 0; i < calls.size(); ++i) {
    waiters.emplace_back([&, i] {
      const bool victim = replica_of[i] == kVictim;
      const bool want_terminal = victim && !options.failover;
      const bool seen = calls[i]->WaitUntil(
          [&](const GenerateResult& r) {
            return want_terminal ? r.terminals > 0 : r.tokens.size() > at_kill[i];
          },
          absl::Seconds(120));
      if (seen) ms[i] = MillisSince(killed);
    });
  }
  for (std::thread& t : waiters) t.join();
  pipeline->KillWorker(0, kVictim);  // Reaps it.

  double replayed = 0;
  int victims = 0;
  std::vector<std::string> ids;
  for (size_t i = 0; i < calls.size(); ++i) {
    ids.push_back(absl::StrCat("resume-", i));
    if (replica_of[i] != kVictim) {
      if (ms[i] >= 0) figures.survivors_ms.push_back(ms[i]);
      continue;
    }
    ++victims;
    replayed += static_cast<double>(at_kill[i]);
    if (ms[i] >= 0) {
      figures.victims_ms.push_back(ms[i]);
    } else {
      ++figures.victims_failed;
    }
  }
  figures.replayed_tokens = victims > 0 ? replayed / victims : 0;
  (void)pipeline->Abort(ids);
  for (auto& call : calls) call->Wait(absl::Seconds(30));
  figures.ok = victims > 0;
  return figures;
}

MemoryFigures MeasureMemory(const MemoryOptions& options) {
  MemoryFigures figures;
  PipelineSpec spec;
  spec.name = "memory";
  // A thousand requests of 2,000 tokens keep both cores busy: pings may wait
  // longer than the tests' 0.5 s without any replica being gone.
  spec.keepalive_ms = 5000;
  spec.keepalive_timeout_ms = 5000;
  spec.stages.push_back(SimStage("first", "batch_size=4096,step_time_us=0", 1, false));
  // Slow: every request stays in flight on "second" while RSS is read.
  StageSpec second = SimStage("second", "batch_size=4096,step_time_us=100000", 2, true);
  second.input_mode = "streaming";
  second.failover_max_attempts = options.failover ? 3 : 0;
  spec.stages.push_back(second);
  std::unique_ptr<PipelineHarness> pipeline = Start(spec);
  if (pipeline == nullptr) return figures;
  const pid_t orchestrator = pipeline->orchestrator()->pid();

  // A few requests first, so that what every request needs once is allocated.
  std::vector<v1::GenerateRequest> warm;
  for (int i = 0; i < 16; ++i) warm.push_back(Request(absl::StrCat("warm-", i), i, {8, 2}));
  pipeline->GenerateAll(warm);
  absl::SleepFor(absl::Seconds(1));
  absl::StatusOr<int64_t> idle = ReadRssKib(orchestrator);

  LoadOptions load;
  load.streams = options.requests;
  const uint32_t replay_tokens = static_cast<uint32_t>(options.replay_tokens);
  load.make_request = [replay_tokens](int slot, int64_t seq) {
    return Request(absl::StrCat("memory-", seq), slot, {replay_tokens, 1000000});
  };
  StreamGroup group(pipeline->stub(), load);
  group.Start();
  // Every request in flight and past "first": its whole input to "second" sent.
  const bool all_in = Eventually(
      [&] {
        absl::StatusOr<v1::PipelineStatus> status = pipeline->Status();
        return status.ok() && status->in_flight_requests() == options.requests &&
               status->stages(0).replicas(0).bound_requests() == 0;
      },
      absl::Seconds(120), absl::Milliseconds(100));
  absl::SleepFor(absl::Seconds(1));
  absl::StatusOr<int64_t> busy = ReadRssKib(orchestrator);
  group.CancelAll();
  group.WaitDone(absl::Seconds(60));
  if (!all_in || !idle.ok() || !busy.ok()) {
    std::cerr << "memory: the requests were not all in flight, or no RSS\n";
    return figures;
  }
  figures.idle_kib = *idle;
  figures.in_flight_kib = *busy;
  figures.per_request_kib = static_cast<double>(*busy - *idle) / options.requests;
  figures.ok = true;
  return figures;
}

}  // namespace bench
}  // namespace omnistage
