// What a Python engine costs: tokens/s and time per step of sim_llm's Python
// port against the C++ sim_llm, at 1 and 64 streams with zero step time — the
// bare engine stepped in a loop, and through a real worker session — and of
// the cheapest possible Python engine (one constant token per request), which
// is the adapter's own cost (GIL, calls, conversion). Each figure is measured
// three times in this run: median and range.
//
//   bazel run -c opt //tests/bench:python_engine_benchmark
#include <algorithm>
#include <cstdio>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "stage_worker/engines/registry.h"
#include "tests/bench/worker_session_bench.h"

namespace omnistage {
namespace {

struct Kind {
  const char* label;
  std::string engine;
  std::map<std::string, std::string> params;
};

std::vector<Kind> Kinds(int batch) {
  const std::string b = absl::StrCat(batch);
  const std::string path =
      "stage_worker/engines/python:stage_worker/engines/python/testdata";
  return {
      {"C++ sim_llm", "sim_llm", {{"batch_size", b}}},
      {"Python sim_llm", "python",
       {{"batch_size", b}, {"path", path}, {"module", "omnistage_engines.sim_llm"},
        {"class", "SimLlm"}}},
      {"Python constant", "python",
       {{"batch_size", b}, {"path", path}, {"module", "test_engines"}, {"class", "Constant"}}},
  };
}

struct Figures {
  double tokens_per_s = 0;
  double us_per_step = 0;
};

uint64_t Tokens(const v1::RequestOutput& out) {
  uint64_t n = 0;
  for (const v1::Payload& p : out.payloads()) n += p.tokens().ids_size();
  return n;
}

Figures Bare(const Kind& kind, int batch, uint32_t tokens) {
  std::unique_ptr<Engine> engine = *CreateEngine(kind.engine, kind.params);
  for (int i = 0; i < batch; ++i) {
    EngineRequest request;
    request.id = absl::StrCat("r", i);
    request.input.emplace_back().mutable_text()->set_text(absl::StrCat("prompt ", i));
    request.params.set_max_tokens(tokens);
    (void)engine->ValidateInLoop(request);
    (void)engine->Add(std::move(request));
  }
  const absl::Time start = absl::Now();
  uint64_t produced = 0, steps = 0;
  while (engine->HasWork()) {
    absl::StatusOr<std::vector<v1::RequestOutput>> outputs = engine->Step();
    ++steps;
    for (const v1::RequestOutput& out : *outputs) produced += Tokens(out);
  }
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  return {produced / seconds, seconds * 1e6 / steps};
}

Figures ThroughWorker(const Kind& kind, int batch, uint32_t tokens) {
  const SessionRun run = RunThroughWorker(kind.engine, kind.params, batch, tokens);
  return {run.tokens / run.seconds, run.steps == 0 ? 0 : run.seconds * 1e6 / run.steps};
}

// "median [min-max]" of three runs of `measure`'s field `field`.
void Report(const char* what, int batch, const Kind& kind,
            const std::function<Figures()>& measure) {
  std::vector<Figures> runs;
  for (int i = 0; i < 3; ++i) runs.push_back(measure());
  auto spread = [&runs](double Figures::*field) {
    std::vector<double> v;
    for (const Figures& f : runs) v.push_back(f.*field);
    std::sort(v.begin(), v.end());
    return absl::StrCat(static_cast<int64_t>(v[1] + 0.5), " [", static_cast<int64_t>(v[0] + 0.5),
                        "-", static_cast<int64_t>(v[2] + 0.5), "]");
  };
  auto spread_us = [&runs](double Figures::*field) {
    std::vector<double> v;
    for (const Figures& f : runs) v.push_back(f.*field);
    std::sort(v.begin(), v.end());
    char text[64];
    std::snprintf(text, sizeof(text), "%.2f [%.2f-%.2f]", v[1], v[0], v[2]);
    return std::string(text);
  };
  std::printf("%-8s %-6d %-16s %28s %26s\n", what, batch, kind.label,
              spread(&Figures::tokens_per_s).c_str(), spread_us(&Figures::us_per_step).c_str());
}

}  // namespace
}  // namespace omnistage

int main() {
  using omnistage::Figures;
  std::printf("%-8s %-6s %-16s %28s %26s\n", "path", "batch", "engine", "tokens/s median [range]",
              "us/step median [range]");
  for (const auto& shape : {std::pair{1, 20000u}, {64, 1000u}}) {
    const int batch = shape.first;
    const unsigned tokens = shape.second;
    for (const omnistage::Kind& kind : omnistage::Kinds(batch)) {
      omnistage::Report("bare", batch, kind,
                        [&] { return omnistage::Bare(kind, batch, tokens); });
    }
    for (const omnistage::Kind& kind : omnistage::Kinds(batch)) {
      omnistage::Report("worker", batch, kind,
                        [&] { return omnistage::ThroughWorker(kind, batch, tokens); });
    }
  }
  return 0;
}
