// Stage worker throughput: tokens/s through a real gRPC session at batch 1, 64
// and 256 with zero step time, against the bare engine in the same run, and
// session messages per engine step.
//
//   bazel run -c opt //tests/bench:worker_benchmark
#include <cstdio>
#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "stage_worker/engines/registry.h"
#include "tests/bench/worker_session_bench.h"

namespace omnistage {
namespace {

struct Figures {
  double tokens_per_s = 0;
  double messages_per_step = 0;
};

std::map<std::string, std::string> Params(int batch) {
  return {{"batch_size", absl::StrCat(batch)}, {"step_time_us", "0"}};
}

EngineRequest Request(int i, uint32_t tokens) {
  EngineRequest request;
  request.id = absl::StrCat("r", i);
  request.input.emplace_back().mutable_text()->set_text(absl::StrCat("prompt ", i));
  request.params.set_max_tokens(tokens);
  return request;
}

// The engine alone, stepped in a loop: the ceiling for the worker.
double BareEngineTokensPerSecond(int batch, uint32_t tokens) {
  std::unique_ptr<Engine> engine = *CreateEngine("sim_llm", Params(batch));
  for (int i = 0; i < batch; ++i) (void)engine->Add(Request(i, tokens));
  const absl::Time start = absl::Now();
  uint64_t produced = 0;
  while (engine->HasWork()) {
    absl::StatusOr<std::vector<v1::RequestOutput>> outputs = engine->Step();
    for (const v1::RequestOutput& out : *outputs) {
      for (const v1::Payload& p : out.payloads()) produced += p.tokens().ids_size();
    }
  }
  return produced / absl::ToDoubleSeconds(absl::Now() - start);
}

Figures ThroughWorker(int batch, uint32_t tokens) {
  const SessionRun run = RunThroughWorker("sim_llm", Params(batch), batch, tokens);
  return Figures{run.tokens / run.seconds,
                 run.steps == 0 ? 0 : static_cast<double>(run.messages) / run.steps};
}

}  // namespace
}  // namespace omnistage

int main() {
  std::printf("%-6s %-8s %16s %16s %8s %18s\n", "batch", "tokens", "worker tok/s",
              "bare engine tok/s", "ratio", "messages/step");
  for (const auto& [batch, tokens] : {std::pair{1, 20000u}, {64, 2000u}, {256, 1000u}}) {
    const double bare = omnistage::BareEngineTokensPerSecond(batch, tokens);
    const omnistage::Figures worker = omnistage::ThroughWorker(batch, tokens);
    std::printf("%-6d %-8u %16.0f %16.0f %8.3f %18.3f\n", batch, tokens, worker.tokens_per_s,
                bare, worker.tokens_per_s / bare, worker.messages_per_step);
  }
  return 0;
}
