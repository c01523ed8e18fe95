// SteadyLoad: requests of a few known shapes streaming without pause through a
// pipeline while a test changes it underneath (rolls, scaling), and the check
// that none failed and each output equals the shape's output from a quiet run.
//
//   SteadyLoad load(pipeline.get());     // one quiet run of every shape first
//   load.Start(32);                      // 32 client threads, back to back
//   ... kill, roll, scale ...
//   EXPECT_GT(load.FinishAndCheck(), 100);
//
// Uses gtest assertions; for tests only. The single-stage sim_llm pipelines
// of the roll and discovery tests (final tokens).
#ifndef OMNISTAGE_TESTS_STEADY_LOAD_H_
#define OMNISTAGE_TESTS_STEADY_LOAD_H_

#include <atomic>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "tests/pipeline_harness.h"

namespace omnistage {

class SteadyLoad {
 public:
  static constexpr int kShapes = 16;

  // Runs every shape once, quietly, for the outputs to expect.
  explicit SteadyLoad(PipelineHarness* pipeline);
  ~SteadyLoad();

  // Starts `clients` threads, each sending one request after another.
  void Start(int clients);
  // Stops the clients, checks every result (one terminal, FINISH_REASON_LENGTH,
  // the shape's tokens) and returns how many there were.
  int FinishAndCheck();

 private:
  static v1::GenerateRequest ShapeRequest(const std::string& id, int shape);
  void Stop();

  PipelineHarness* const pipeline_;
  std::vector<std::vector<int32_t>> expected_;
  std::atomic<bool> stop_{false};
  absl::Mutex mu_;
  std::vector<std::pair<int, GenerateResult>> results_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> clients_;
};

}  // namespace omnistage

#endif  // OMNISTAGE_TESTS_STEADY_LOAD_H_
