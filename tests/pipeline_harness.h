// PipelineHarness: a whole pipeline as real processes, for multi-process tests.
//
// It starts one stage_worker process per replica itself (port 0, port read from
// the worker's "listening port=" line), writes a pipeline config with
// `addresses:` for every stage to $TEST_TMPDIR, and starts the orchestrator
// binary on port 0 against it. Because the harness, not the orchestrator, owns
// the workers, a test can kill -9 one replica and start it again on the same
// port. Every process is stopped by PID when the harness goes away, also when a
// test fails (ChildProcess kills and reaps in its destructor).
//
// Binaries come from the test's `data` deps, at "stage_worker/stage_worker" and
// "orchestrator/orchestrator" relative to the working directory (the runfiles
// root under `bazel test`).
//
//   StageSpec llm;
//   llm.name = "llm";
//   llm.engine_params = "step_time_us=1000";
//   llm.replicas = 2;
//   llm.final_output = true;
//   PipelineSpec spec;
//   spec.stages = {llm};
//   absl::StatusOr<std::unique_ptr<PipelineHarness>> pipeline = PipelineHarness::Start(spec);
//   GenerateResult result = (*pipeline)->Generate(MakeRequest("r1", "hello"));
//   (*pipeline)->KillWorker(/*stage=*/0, /*replica=*/1);
//   ASSERT_TRUE((*pipeline)->RestartWorker(0, 1).ok());
//
// Thread-safety: Generate, GenerateAll, StartGenerate, Abort, Status and Stats
// may be called from any thread; the process-control methods (KillWorker,
// RestartWorker, StartOrchestrator) belong to the test's main thread, and
// StartOrchestrator must not race with client calls (it replaces the stub).
#ifndef OMNISTAGE_TESTS_PIPELINE_HARNESS_H_
#define OMNISTAGE_TESTS_PIPELINE_HARNESS_H_

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/testing/child_process.h"
#include "grpcpp/grpcpp.h"
#include "protos/orchestrator.grpc.pb.h"
#include "tests/generate_call.h"
#include "tests/pipeline_spec.h"

namespace omnistage {

inline constexpr char kStageWorkerBinary[] = "stage_worker/stage_worker";
inline constexpr char kOrchestratorBinary[] = "orchestrator/orchestrator";

// A worker engine's "stats" utility.
struct WorkerStats {
  int64_t running = 0;
  int64_t waiting = 0;
  int64_t steps = 0;
  int64_t capacity = 0;
  int64_t abort_calls = 0;
  // Engines with a prefix cache (docs/engines.md): input tokens found cached
  // and prefilled since the worker started; 0 without one.
  int64_t prefix_cache_hit_tokens = 0;
  int64_t prefix_cache_miss_tokens = 0;
  int64_t prefix_cache_blocks = 0;
};

class PipelineHarness {
 public:
  // Starts every worker, then the orchestrator, and waits until every replica
  // is alive in the orchestrator's status.
  static absl::StatusOr<std::unique_ptr<PipelineHarness>> Start(PipelineSpec spec);
  // Stops the orchestrator first (so it does not chase dying workers), then the
  // workers, all with SIGKILL.
  ~PipelineHarness();

  const PipelineSpec& spec() const { return spec_; }
  int replicas(int stage) const { return static_cast<int>(workers_[stage].size()); }

  // ---- Workers -----------------------------------------------------------------
  int worker_port(int stage, int replica) const { return workers_[stage][replica].port; }
  // From the worker's port line when it runs with --metrics_listen; else 0.
  int worker_metrics_port(int stage, int replica) const {
    return workers_[stage][replica].metrics_port;
  }
  std::string worker_address(int stage, int replica) const;
  // The instance id from the worker's port line.
  const std::string& worker_instance(int stage, int replica) const {
    return workers_[stage][replica].instance;
  }
  pid_t worker_pid(int stage, int replica) const;
  ChildProcess* worker_process(int stage, int replica) const {
    return workers_[stage][replica].process.get();
  }
  // kill -9 and reap.
  void KillWorker(int stage, int replica);
  // Starts one more worker of `stage` on `host`, at the port of its replica 0
  // (a new pod of a discovered stage); returns its replica index here (the
  // orchestrator numbers replicas in the order it learns them).
  absl::StatusOr<int> AddWorker(int stage, const std::string& host);
  // Starts a killed worker again with the same flags, on the same port.
  absl::Status RestartWorker(int stage, int replica);

  // ---- Orchestrator ---------------------------------------------------------------
  // Starts (or starts again) the orchestrator on port 0 against the workers and
  // waits until every replica is alive.
  absl::Status StartOrchestrator();
  ChildProcess* orchestrator() const { return orchestrator_.get(); }
  int orchestrator_port() const { return orchestrator_port_; }
  // With --metrics_listen among spec.orchestrator_flags; else 0.
  int orchestrator_metrics_port() const { return orchestrator_metrics_port_; }
  const std::string& config_path() const { return config_path_; }
  std::shared_ptr<v1::Orchestrator::Stub> stub() const { return stub_; }
  // A channel to the orchestrator with `tls` (the spec's client_tls by
  // default), for tests that call it as someone else.
  std::shared_ptr<grpc::Channel> NewChannel(const TlsFiles& tls) const;
  std::shared_ptr<grpc::Channel> NewChannel() const { return NewChannel(spec_.client_tls); }
  // Waits until GetPipelineStatus shows every replica alive and, with
  // `listed_as_specified`, each stage listing at least the replicas its spec
  // starts it with (a DNS stage lists none before its first lookup).
  absl::Status WaitAllAlive(absl::Duration timeout, bool listed_as_specified = false);

  // ---- Client -----------------------------------------------------------------------
  // Blocking: runs one Generate to its end.
  GenerateResult Generate(const v1::GenerateRequest& request,
                          absl::Duration timeout = absl::Seconds(30));
  // Runs every request concurrently, one thread each; results in request order.
  std::vector<GenerateResult> GenerateAll(const std::vector<v1::GenerateRequest>& requests,
                                          absl::Duration timeout = absl::Seconds(45));
  std::unique_ptr<GenerateCall> StartGenerate(const v1::GenerateRequest& request,
                                              absl::Duration deadline = absl::Seconds(60));
  // The client's Abort, with `deadline` for the call.
  absl::StatusOr<v1::AbortResponse> Abort(const std::vector<std::string>& ids,
                                          absl::Duration deadline = absl::Seconds(20));
  absl::StatusOr<v1::PipelineStatus> Status();
  // The "stats" utility of every replica of `stage` the orchestrator lists, in
  // its replica order (through the orchestrator's CallStageUtility; it does not
  // touch abort counts). For a stage with fixed addresses, entry r is replica
  // r here; a discovered stage's replicas are numbered in the order they joined.
  std::vector<absl::StatusOr<WorkerStats>> Stats(int stage);
  // Stats of every replica of every stage; an error if any replica did not answer.
  absl::StatusOr<std::vector<std::vector<WorkerStats>>> AllStats();

 private:
  struct Worker {
    int stage = 0;
    std::string host = "127.0.0.1";
    std::vector<std::string> flags;  // Everything but --listen.
    int port = 0;
    int metrics_port = 0;
    std::string instance;
    std::unique_ptr<ChildProcess> process;
  };

  explicit PipelineHarness(PipelineSpec spec) : spec_(std::move(spec)) {}
  // Adds the spec's token to a call.
  void Authorize(grpc::ClientContext& context) const;
  // Replica `replica` of `stage` on `host`, with its flags; not started.
  Worker NewWorker(int stage, int replica, const std::string& host) const;
  // Starts `worker` listening on `port` (0: any) and reads its port line.
  static absl::Status SpawnWorker(Worker& worker, int port);

  const PipelineSpec spec_;
  std::vector<std::vector<Worker>> workers_;
  std::string config_path_;
  std::unique_ptr<ChildProcess> orchestrator_;
  int orchestrator_port_ = 0;
  int orchestrator_metrics_port_ = 0;
  std::shared_ptr<v1::Orchestrator::Stub> stub_;
};

}  // namespace omnistage

#endif  // OMNISTAGE_TESTS_PIPELINE_HARNESS_H_
