// objectives_benchmark: what latency objectives change under overload
// (docs/architecture.md, "Latency objectives"), three admission policies in
// one run, each figure per run and as the spread (min..max) over --runs. No
// targets, no verdicts.
//
//   bazel run -c opt //tests/bench:objectives_benchmark -- --runs=3
//
// One stage-0 replica (sim_llm: 4 batch slots, 20 ms steps, 10 tokens per
// request) behind an orchestrator that queues what the slots cannot take
// (admission_headroom 0). Its capacity (requests per second, closed loop) is
// measured first; then each policy gets open-loop Poisson arrivals at 0.5x,
// 1x, 1.5x, 2x and 3x of it for --seconds each: 40% interactive requests
// (first output within --interactive_ms; a quarter of them critical) and 60%
// background ones (first output within --background_ms). Every request is
// judged by the client against its objective, whatever the policy sent:
//
//   fcfs        nothing but the prompt: arrival order;
//   today       interactive at priority 5, background at 1, no objectives
//               (priority, then fair share, then arrival);
//   objectives  the same priorities, with each request's objective and
//               criticality (interactive critical or standard, background
//               sheddable): earliest deadline first, sheddable requests
//               predicted to miss refused or ended, picks by prediction.
//
// Figures per policy and load: goodput (requests whose first output came
// within their objective and that ended whole, per second), the critical
// requests' attainment, the share refused or shed, and for the objectives
// policy the predictor's error |predicted - actual| / actual: the share of
// all the load's requests predicted within 25% (from the orchestrator's
// error histogram), and p50, p90 over the last 50 requests the orchestrator
// kept, with the p90 of the interactive and the background requests among
// them.
//
// Real processes on 127.0.0.1 (the test harness's stage worker and
// orchestrator), stopped by PID. See docs/benchmarks.md.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "grpcpp/grpcpp.h"
#include "tests/bench/bench_processes.h"
#include "tests/failover_metrics.h"
#include "tests/pipeline_harness.h"

ABSL_FLAG(int, runs, 3, "times each policy runs at each load; figures per run and as min..max");
ABSL_FLAG(double, seconds, 6, "seconds of arrivals at each load");
ABSL_FLAG(int, interactive_ms, 400, "the interactive requests' first-output objective");
ABSL_FLAG(int, background_ms, 1500, "the background requests' first-output objective");

namespace omnistage {
namespace bench {
namespace {

constexpr uint32_t kTokens = 10;
constexpr double kLoads[] = {0.5, 1.0, 1.5, 2.0, 3.0};
enum class Policy { kFcfs, kToday, kObjectives };
constexpr Policy kPolicies[] = {Policy::kFcfs, Policy::kToday, Policy::kObjectives};

const char* Name(Policy policy) {
  switch (policy) {
    case Policy::kFcfs:
      return "fcfs";
    case Policy::kToday:
      return "today";
    default:
      return "objectives";
  }
}

enum class Kind { kCritical, kStandard, kBackground };

// One request's call, on gRPC's callback API (no thread per call): when its
// first output came and how it ended.
class Probe : public grpc::ClientReadReactor<v1::GenerateResponse> {
 public:
  struct Outcome {
    Kind kind = Kind::kStandard;
    double objective_s = 0;
    double first_output_s = -1;
    bool whole = false;
    bool refused = false;  // RESOURCE_EXHAUSTED: refused or shed.
  };

  Probe(v1::Orchestrator::Stub* stub, v1::GenerateRequest request, Outcome outcome,
        std::function<void(const Outcome&)> done)
      : request_(std::move(request)), outcome_(outcome), done_(std::move(done)) {
    context_.set_deadline(DeadlineIn(absl::Seconds(60)));
    sent_ = absl::Now();
    stub->async()->Generate(&context_, &request_, this);
    StartRead(&response_);
    StartCall();
  }

  void OnReadDone(bool ok) override {
    if (!ok) return;
    if (response_.outputs_size() > 0 && outcome_.first_output_s < 0) {
      outcome_.first_output_s = absl::ToDoubleSeconds(absl::Now() - sent_);
    }
    if (response_.has_terminal()) {
      const v1::Terminal& terminal = response_.terminal();
      outcome_.whole = terminal.finish_reason() == v1::FINISH_REASON_LENGTH ||
                       terminal.finish_reason() == v1::FINISH_REASON_STOP;
      outcome_.refused =
          terminal.error().code() == static_cast<int>(grpc::StatusCode::RESOURCE_EXHAUSTED);
    }
    StartRead(&response_);
  }

  void OnDone(const grpc::Status& status) override {
    if (status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) outcome_.refused = true;
    if (!status.ok()) outcome_.whole = false;
    done_(outcome_);
    delete this;
  }

 private:
  grpc::ClientContext context_;
  v1::GenerateRequest request_;
  v1::GenerateResponse response_;
  Outcome outcome_;
  absl::Time sent_;
  std::function<void(const Outcome&)> done_;
};

// What one load point gave.
struct Point {
  double goodput = 0;       // requests per second
  double critical_met = 0;  // share, %
  double refused = 0;       // share of all, %
  // Objectives only: the share of the load's requests whose first output
  // was predicted within 25% (%), and the error's percentiles (%) over the
  // last requests the orchestrator kept.
  double within_25 = 0;
  double error_p50 = 0, error_p90 = 0;
  // The same p90, of the interactive requests and of the background ones
  // (which later interactive arrivals may overtake in the queue).
  double interactive_p90 = 0, background_p90 = 0;
};

// The first-output predictions counted so far by the orchestrator's error
// histogram (omnistage_latency_prediction_error_ratio): all, and those within
// 25% of the actual time.
struct PredictionTally {
  double all = 0;
  double within_25 = 0;
};

PredictionTally Predictions(const PipelineHarness& pipeline) {
  absl::StatusOr<std::string> exposition = ScrapeMetrics(pipeline.orchestrator_metrics_port());
  if (!exposition.ok()) return {};
  const std::string series = "omnistage_latency_prediction_error_ratio";
  const std::string labels = "{prediction=\"first_output\",stage=\"\"";
  return {SampleIn(*exposition, series + "_count" + labels + "}"),
          SampleIn(*exposition, series + "_bucket" + labels + ",le=\"0.25\"}")};
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

std::unique_ptr<PipelineHarness> Start() {
  StageSpec llm;
  llm.name = "llm";
  llm.engine = "sim_llm";
  llm.engine_params = "step_time_us=20000,batch_size=4";
  llm.replicas = 1;
  llm.final_output = true;
  llm.output_modality = "tokens";
  PipelineSpec spec;
  spec.stages = {llm};
  spec.orchestrator_flags = {"--log_level=warning", "--metrics_listen=127.0.0.1:0"};
  spec.limits = {"admission_headroom: 0", "max_queued: 100000", "max_queue_ms: 60000",
                 "max_in_flight: 100000"};
  absl::StatusOr<std::unique_ptr<PipelineHarness>> pipeline = PipelineHarness::Start(spec);
  if (!pipeline.ok()) {
    std::cerr << "cannot start the pipeline: " << pipeline.status() << "\n";
    return nullptr;
  }
  return *std::move(pipeline);
}

// Requests per second the pipeline completes with twice its slots busy.
double Capacity(PipelineHarness& pipeline) {
  std::atomic<int> completed{0};
  std::atomic<bool> stop{false};
  std::vector<std::thread> clients;
  const absl::Time start = absl::Now();
  for (int c = 0; c < 8; ++c) {
    clients.emplace_back([&, c] {
      for (int i = 0; !stop.load(); ++i) {
        GenerateResult r = pipeline.Generate(
            MakeRequest(absl::StrCat("cap-", c, "-", i), "hello", {StageParams(0, kTokens)}));
        if (!stop.load() && r.status.ok()) ++completed;
      }
    });
  }
  absl::SleepFor(absl::Seconds(4));
  const int done = completed.load();
  const double elapsed = absl::ToDoubleSeconds(absl::Now() - start);
  stop = true;
  for (std::thread& t : clients) t.join();
  return done / elapsed;
}

v1::GenerateRequest RequestFor(Policy policy, Kind kind, const std::string& id) {
  v1::GenerateRequest request = MakeRequest(id, "hello", {StageParams(0, kTokens)});
  if (policy == Policy::kFcfs) return request;
  request.set_priority(kind == Kind::kBackground ? 1 : 5);
  if (policy == Policy::kToday) return request;
  v1::LatencyObjectives* objectives = request.mutable_objectives();
  objectives->set_first_output_ms(kind == Kind::kBackground ? absl::GetFlag(FLAGS_background_ms)
                                                            : absl::GetFlag(FLAGS_interactive_ms));
  objectives->set_criticality(kind == Kind::kCritical   ? v1::CRITICALITY_CRITICAL
                              : kind == Kind::kStandard ? v1::CRITICALITY_STANDARD
                                                        : v1::CRITICALITY_SHEDDABLE);
  return request;
}

Point RunLoad(PipelineHarness& pipeline, Policy policy, double rate, const std::string& tag,
              std::mt19937* random) {
  absl::Mutex mu;
  std::vector<Probe::Outcome> outcomes;
  int pending = 0;
  std::exponential_distribution<double> gap(rate);
  std::uniform_real_distribution<double> mix(0, 1);
  const PredictionTally before = Predictions(pipeline);
  const absl::Time start = absl::Now();
  const absl::Time end = start + absl::Seconds(absl::GetFlag(FLAGS_seconds));
  absl::Time next = start;
  for (int i = 0; next < end; ++i) {
    absl::SleepFor(next - absl::Now());
    const double draw = mix(*random);
    Probe::Outcome outcome;
    outcome.kind = draw < 0.1 ? Kind::kCritical : draw < 0.4 ? Kind::kStandard : Kind::kBackground;
    outcome.objective_s =
        (outcome.kind == Kind::kBackground ? absl::GetFlag(FLAGS_background_ms)
                                           : absl::GetFlag(FLAGS_interactive_ms)) /
        1000.0;
    {
      absl::MutexLock lock(&mu);
      ++pending;
    }
    new Probe(pipeline.stub().get(), RequestFor(policy, outcome.kind, absl::StrCat(tag, "-", i)),
              outcome, [&](const Probe::Outcome& o) {
                absl::MutexLock lock(&mu);
                outcomes.push_back(o);
                --pending;
              });
    next += absl::Seconds(gap(*random));
  }
  {
    absl::MutexLock lock(&mu);
    mu.AwaitWithTimeout(absl::Condition(
                            +[](int* p) { return *p == 0; }, &pending),
                        absl::Seconds(90));
  }
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  Point point;
  absl::MutexLock lock(&mu);
  int met = 0, critical = 0, critical_met = 0, refused = 0;
  for (const Probe::Outcome& o : outcomes) {
    const bool in_time = o.whole && o.first_output_s >= 0 && o.first_output_s <= o.objective_s;
    met += in_time;
    refused += o.refused;
    if (o.kind == Kind::kCritical) {
      ++critical;
      critical_met += in_time;
    }
  }
  point.goodput = met / seconds;
  point.critical_met = critical > 0 ? 100.0 * critical_met / critical : std::nan("");
  point.refused = outcomes.empty() ? 0 : 100.0 * refused / static_cast<double>(outcomes.size());
  if (policy == Policy::kObjectives) {
    const PredictionTally after = Predictions(pipeline);
    point.within_25 = after.all > before.all
                          ? 100 * (after.within_25 - before.within_25) / (after.all - before.all)
                          : std::nan("");
    absl::StatusOr<v1::PipelineStatus> status = pipeline.Status();
    std::vector<double> errors, interactive, background;
    if (status.ok()) {
      for (const v1::FinishedRequest& r : status->recent()) {
        if (r.predicted_first_output_seconds() <= 0 || r.first_output_seconds() <= 0) continue;
        const double error =
            std::abs(r.predicted_first_output_seconds() - r.first_output_seconds()) /
            r.first_output_seconds();
        errors.push_back(error);
        (r.criticality() == v1::CRITICALITY_SHEDDABLE ? background : interactive).push_back(error);
      }
    }
    point.error_p50 = 100 * Percentile(errors, 0.5);
    point.error_p90 = 100 * Percentile(errors, 0.9);
    point.interactive_p90 = 100 * Percentile(interactive, 0.9);
    point.background_p90 = 100 * Percentile(background, 0.9);
  }
  return point;
}

// Each value (NaN: "-"), then (min..max) of the others.
std::string Spread(const std::vector<double>& values, int decimals) {
  std::string out;
  double lo = 1e300, hi = -1e300;
  for (double v : values) {
    if (std::isnan(v)) {
      absl::StrAppend(&out, out.empty() ? "" : " ", "-");
      continue;
    }
    absl::StrAppend(&out, out.empty() ? "" : " ", absl::StrFormat("%.*f", decimals, v));
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  if (lo > hi) return out;
  return absl::StrCat(out, " (", absl::StrFormat("%.*f", decimals, lo), "..",
                      absl::StrFormat("%.*f", decimals, hi), ")");
}

int Run(const std::string&) {
  const int runs = std::max(1, absl::GetFlag(FLAGS_runs));
  // [policy][load] -> per run.
  std::map<Policy, std::map<double, std::vector<Point>>> points;
  std::vector<double> capacities;
  std::mt19937 random(2026);
  for (int run = 0; run < runs; ++run) {
    for (Policy policy : kPolicies) {
      // A fresh pipeline per policy: nothing learned carries over.
      std::unique_ptr<PipelineHarness> pipeline = Start();
      if (pipeline == nullptr) return 1;
      const double capacity = Capacity(*pipeline);
      capacities.push_back(capacity);
      for (double load : kLoads) {
        points[policy][load].push_back(RunLoad(*pipeline, policy, load * capacity,
                                               absl::StrCat(Name(policy), run, "-", load),
                                               &random));
      }
      std::cerr << "run " << run + 1 << " " << Name(policy) << " done (capacity "
                << absl::StrFormat("%.1f", capacity) << " req/s)\n";
    }
  }
  std::cout << "# Latency objectives under overload, " << runs
            << " run(s): per run, then (min..max)\n"
            << "# capacity req/s: " << Spread(capacities, 1) << "; objectives: interactive "
            << absl::GetFlag(FLAGS_interactive_ms) << " ms, background "
            << absl::GetFlag(FLAGS_background_ms) << " ms\n\n";
  for (Policy policy : kPolicies) {
    std::cout << Name(policy) << ":\n";
    const std::vector<Point>& base = points[policy][1.0];
    for (double load : kLoads) {
      const std::vector<Point>& at = points[policy][load];
      std::vector<double> goodput, of_1x, critical, refused, within, p50, p90, interactive,
          background;
      for (size_t i = 0; i < at.size(); ++i) {
        goodput.push_back(at[i].goodput);
        of_1x.push_back(base[i].goodput > 0 ? 100 * at[i].goodput / base[i].goodput : 0);
        critical.push_back(at[i].critical_met);
        refused.push_back(at[i].refused);
        within.push_back(at[i].within_25);
        p50.push_back(at[i].error_p50);
        p90.push_back(at[i].error_p90);
        interactive.push_back(at[i].interactive_p90);
        background.push_back(at[i].background_p90);
      }
      std::cout << absl::StrFormat("  %.1fx goodput req/s ", load) << Spread(goodput, 1)
                << "\n       goodput % of 1x   " << Spread(of_1x, 0)
                << "\n       critical met %    " << Spread(critical, 0)
                << "\n       refused or shed % " << Spread(refused, 0) << "\n";
      if (policy == Policy::kObjectives) {
        std::cout << "       predicted within 25 % of all % " << Spread(within, 0)
                  << "\n       predictor error p50 % " << Spread(p50, 0)
                  << "\n       predictor error p90 % " << Spread(p90, 0)
                  << "\n         interactive p90 % " << Spread(interactive, 0)
                  << "\n          background p90 % " << Spread(background, 0) << "\n";
      }
    }
  }
  return 0;
}

}  // namespace
}  // namespace bench
}  // namespace omnistage

int main(int argc, char** argv) {
  return omnistage::bench::RunInScratchDir(argc, argv, omnistage::bench::Run);
}
