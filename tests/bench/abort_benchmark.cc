// abort_benchmark: event-loop time of the core's batch paths with many requests
// in flight — one Abort of every id, the death of a replica holding a quarter of
// them, and a drain whose deadline aborts them all — at 1,000 and 10,000 in
// flight. Replicas are fakes that answer at once, so the figures are the core's
// own work (the time the event loop, and so every stream, is held).
//
//   bazel run -c opt //tests/bench:abort_benchmark [-- --runs=15]
//
// Prints, at 10,000 in flight, min / median / max over the runs and the cost per
// id; and the medians at 2,500 and 5,000 with the ratios from one size to the
// next (2x when linear, 4x when quadratic).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "common/testing/manual_scheduler.h"
#include "orchestrator/config/pipeline_config.h"
#include "orchestrator/core/pipeline_core.h"
#include "orchestrator/core/response_sink.h"
#include "orchestrator/routing/testing/fake_replica_client.h"

ABSL_FLAG(int, runs, 15, "repetitions of each measurement");
ABSL_FLAG(std::string, only, "", "run only the measurements whose name contains this");

namespace omnistage {
namespace {

class NullSink : public ResponseSink {
 public:
  void Send(const std::string&, std::vector<v1::OutputChunk>) override {}
  void Finish(const std::string&, v1::Terminal) override {}
  void Fail(const absl::Status&) override {}
};

PipelineConfig Config(int requests) {
  PipelineConfig config;
  const char* names[] = {"thinker", "talker", "vocoder"};
  const v1::Modality modalities[] = {v1::MODALITY_TEXT, v1::MODALITY_TOKENS, v1::MODALITY_AUDIO};
  for (int s = 0; s < 3; ++s) {
    StageConfig stage;
    stage.id = s;
    stage.name = names[s];
    for (int r = 0; r < 4; ++r) stage.addresses.push_back(absl::StrCat(names[s], r, ":1"));
    stage.final_output = s != 1;
    stage.output_modality = modalities[s];
    stage.input_mode = InputMode::kStreaming;
    stage.defaults.set_stage_id(s);
    config.stages.push_back(stage);
  }
  config.max_in_flight = 2 * requests;
  return config;
}

// A core with `requests` in flight, each started on the thinker and the talker.
struct Pipeline {
  explicit Pipeline(int requests) {
    std::vector<std::vector<ReplicaClient*>> replicas(3);
    for (int s = 0; s < 3; ++s) {
      for (int r = 0; r < 4; ++r) {
        fakes.push_back(std::make_unique<FakeReplicaClient>(absl::StrCat(s, "/", r), &log));
        replicas[s].push_back(fakes.back().get());
      }
    }
    core = std::make_unique<PipelineCore>(Config(requests), std::move(replicas), &scheduler);
    v1::Ready ready;
    for (int s = 0; s < 3; ++s) {
      for (int r = 0; r < 4; ++r) {
        ready.set_instance_id(absl::StrCat(s, "/", r));
        core->OnReplicaReady(s, r, ready);
      }
    }
    auto sink = std::make_shared<NullSink>();
    for (int i = 0; i < requests; ++i) {
      ids.push_back(absl::StrCat("r", i));
      v1::GenerateRequest request;
      request.set_request_id(ids.back());
      request.set_prompt("hello");
      core->Generate(request, sink);
      v1::StepOutputs step;
      v1::RequestOutput* output = step.add_outputs();
      output->set_request_id(ids.back());
      output->add_payloads()->mutable_text()->set_text("x");
      core->OnStepOutputs(0, i % 4, step);
    }
    log.clear();
  }
  ManualScheduler scheduler;
  std::vector<std::string> log;
  std::vector<std::unique_ptr<FakeReplicaClient>> fakes;
  std::unique_ptr<PipelineCore> core;
  std::vector<std::string> ids;
};

double Millis(const std::function<void()>& f) {
  const auto start = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

struct Spread {
  double min, median, max;
};

Spread Of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return {v.front(), v[v.size() / 2], v.back()};
}

// Times `op` on a fresh pipeline of `requests` per run (set-up not timed).
Spread Measure(int requests, const std::function<void(Pipeline&)>& op) {
  std::vector<double> times;
  for (int run = 0; run < absl::GetFlag(FLAGS_runs); ++run) {
    Pipeline p(requests);
    times.push_back(Millis([&] { op(p); }));
    if (p.core->in_flight() == static_cast<size_t>(requests)) std::abort();  // Did nothing.
  }
  return Of(times);
}

void Report(const char* what, const std::function<void(Pipeline&)>& op, int affected_per_1000) {
  if (std::string(what).find(absl::GetFlag(FLAGS_only)) == std::string::npos) return;
  const Spread quarter = Measure(2500, op);
  const Spread half = Measure(5000, op);
  const Spread full = Measure(10000, op);
  std::printf("%-40s %7.2f %7.2f %7.2f ms %5.2f us/id | %6.2f %6.2f ms  x%.1f x%.1f\n", what,
              full.min, full.median, full.max, 1000 * full.median / (10 * affected_per_1000),
              quarter.median, half.median, half.median / quarter.median,
              full.median / half.median);
}

}  // namespace
}  // namespace omnistage

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  using omnistage::Pipeline;
  std::printf("%-40s %-34s | %-15s  %s\n", "event-loop time (medians of runs)",
              "10,000 in flight: min med max, per id", "2,500 and 5,000", "growth per 2x");
  omnistage::Report(
      "Generate of as many again (the baseline)",
      [](Pipeline& p) {
        // Admission of 10,000 more on top: the per-request cost to compare with.
        auto sink = std::make_shared<omnistage::NullSink>();
        for (size_t i = 0; i < p.ids.size(); ++i) {
          omnistage::v1::GenerateRequest request;
          request.set_request_id(absl::StrCat("new", i));
          request.set_prompt("hello");
          p.core->Generate(request, sink);
        }
      },
      1000);
  omnistage::Report(
      "Abort of every id, one call",
      [](Pipeline& p) {
        omnistage::v1::AbortRequest request;
        for (const std::string& id : p.ids) request.add_request_ids(id);
        p.core->Abort(request, absl::InfiniteFuture(),
                      [](absl::StatusOr<omnistage::v1::AbortResponse>) {});
      },
      1000);
  omnistage::Report(
      "Death of a replica holding a quarter",
      [](Pipeline& p) { p.core->OnReplicaDown(0, 1, absl::UnavailableError("reset")); }, 250);
  omnistage::Report(
      "Drain deadline aborting every request",
      [](Pipeline& p) {
        p.core->Drain(p.scheduler.Now(), [] {});
        p.scheduler.RunPending();
      },
      1000);
  return 0;
}
