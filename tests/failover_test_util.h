// Shared pieces of the failover process tests (failover_test,
// failover_hang_test): seeded requests, whose output a replay on
// another replica reproduces (docs/reliability.md), and the check that a run
// with a fault delivered exactly what the fault-free run did. Uses gtest
// assertions; for tests only.
#ifndef OMNISTAGE_TESTS_FAILOVER_TEST_UTIL_H_
#define OMNISTAGE_TESTS_FAILOVER_TEST_UTIL_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "protos/orchestrator.pb.h"
#include "tests/pipeline_harness.h"

namespace omnistage {

// Parameters for `stage` with `seed`, and max_tokens when given.
v1::StageParameters SeededParams(int stage, uint64_t seed,
                                 std::optional<uint32_t> max_tokens = std::nullopt);

// A request through OmniSpec's three stages: the thinker writes `sentences`
// sentences; every stage has the seed derived from `n`, and the prompt is n's.
v1::GenerateRequest SeededOmniRequest(const std::string& id, int n, int sentences);

// A request through sim_llm stages: stage s makes tokens[s] tokens; every stage
// has the seed derived from `n`, and the prompt is n's.
v1::GenerateRequest SeededSimRequest(const std::string& id, int n,
                                     const std::vector<uint32_t>& tokens);

// `requests` with each id prefixed by `prefix` (ids are unique in flight; the
// output depends on the prompt and the parameters only).
std::vector<v1::GenerateRequest> Renamed(std::vector<v1::GenerateRequest> requests,
                                         const std::string& prefix);

// `got` ended normally, as `want` did, with the same content per modality
// (text, audio and tokens byte for byte). `want` must itself have ended
// normally.
void ExpectSameContent(const GenerateResult& got, const GenerateResult& want);

// Runs every request of `requests` fault-free and expects each to end normally;
// returns the results in order.
std::vector<GenerateResult> FaultFreeRun(PipelineHarness& pipeline,
                                         const std::vector<v1::GenerateRequest>& requests);

// Starts every request, waits until `started` holds for each (mid-stream),
// calls `fault`, then waits for every call (bounded) and returns the results in
// order.
std::vector<GenerateResult> RunWithFault(PipelineHarness& pipeline,
                                         const std::vector<v1::GenerateRequest>& requests,
                                         const std::function<bool(const GenerateResult&)>& started,
                                         const std::function<void()>& fault);

// Calls started one by one, each bound to a replica of stage 0 before the next
// starts, and the replica it went to (read from the orchestrator's status, so
// the requests must outlast the whole start).
struct PlacedCall {
  std::unique_ptr<GenerateCall> call;
  int replica = -1;
};
std::vector<PlacedCall> StartPlaced(PipelineHarness& pipeline,
                                    const std::vector<v1::GenerateRequest>& requests);

// How many requests the orchestrator holds bound to `replica` of `stage`; -1
// (and a test failure) when the status does not answer.
int BoundTo(PipelineHarness& pipeline, int stage, int replica);

// Predicates for RunWithFault.
bool HasAudio(const GenerateResult& r);
bool HasOutput(const GenerateResult& r);

}  // namespace omnistage

#endif  // OMNISTAGE_TESTS_FAILOVER_TEST_UTIL_H_
