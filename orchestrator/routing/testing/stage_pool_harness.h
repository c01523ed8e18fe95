// Shared helpers for the StagePool tests (stage_pool_examples_test.cc and
// stage_pool_test.cc): a pool over FakeReplicaClients that share one call log (so
// the global order of calls can be asserted), a matcher for absl::StatusOr, and a
// recorder for the pool's asynchronous Abort callback.
#ifndef OMNISTAGE_ORCHESTRATOR_ROUTING_TESTING_STAGE_POOL_HARNESS_H_
#define OMNISTAGE_ORCHESTRATOR_ROUTING_TESTING_STAGE_POOL_HARNESS_H_

#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gmock/gmock.h"
#include "orchestrator/routing/replica_client.h"
#include "orchestrator/routing/stage_pool.h"
#include "orchestrator/routing/testing/fake_replica_client.h"

namespace omnistage {
namespace stage_pool_test {

// absl::StatusOr has no operator bool, so testing::Optional does not apply.
MATCHER_P(IsOkAndHolds, expected, "is OK and holds " + ::testing::PrintToString(expected)) {
  if (!arg.ok()) {
    *result_listener << "status " << arg.status();
    return false;
  }
  *result_listener << "holds " << *arg;
  return *arg == expected;
}

// What the pool's asynchronous Abort reported, so tests can check that `done`
// ran exactly once, with which status and which failed groups.
struct DoneRecorder {
  int calls = 0;
  absl::Status status = absl::UnknownError("done never ran");
  std::vector<ReplicaAbortFailure> failures;

  std::function<void(PoolAbortResult)> Callback() {
    return [this](PoolAbortResult result) {
      ++calls;
      status = result.status();
      failures = std::move(result.failures);
    };
  }
};

// Pool aborts in these tests have no deadline.
inline constexpr absl::Time kNoDeadline = absl::InfiniteFuture();

inline std::shared_ptr<StagePool> MakePool(int stage, std::vector<FakeReplicaClient*> fakes) {
  std::vector<ReplicaClient*> replicas(fakes.begin(), fakes.end());
  return std::make_shared<StagePool>(stage, std::move(replicas));
}

}  // namespace stage_pool_test
}  // namespace omnistage

#endif  // OMNISTAGE_ORCHESTRATOR_ROUTING_TESTING_STAGE_POOL_HARNESS_H_
