// LocalWorkers: the stage_worker processes an orchestrator spawns on loopback for
// the stages of its config that say `replicas: N`, supervised by one thread each:
// a worker that exits is started again on the same port (with backoff), so the
// orchestrator's reconnect finds it as a new incarnation. Stop() ends them all
// (SIGTERM, then SIGKILL); they also die with the orchestrator
// (PR_SET_PDEATHSIG, tied to the supervising thread).
#ifndef OMNISTAGE_ORCHESTRATOR_REPLICAS_LOCAL_WORKERS_H_
#define OMNISTAGE_ORCHESTRATOR_REPLICAS_LOCAL_WORKERS_H_

#include <sys/types.h>

#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "orchestrator/config/pipeline_config.h"

namespace omnistage {

class LocalWorkers {
 public:
  // Spawns every local worker of `config` with `worker_binary` and waits until
  // each prints its port. Errors name the stage and replica and say why; a
  // worker that refuses its engine or parameters gives INVALID_ARGUMENT with the
  // config field path (common/field_error.h), e.g.
  // "stages[1].engine_params.batch_size". `extra_args` go to every worker
  // (e.g. the orchestrator's own log format and level).
  static absl::StatusOr<std::unique_ptr<LocalWorkers>> Start(
      const PipelineConfig& config, const std::string& worker_binary,
      const std::vector<std::string>& extra_args = {});
  ~LocalWorkers();

  // addresses[s][r] for every stage: the spawned workers' loopback addresses, or
  // the config's `addresses` for stages that are not spawned.
  const std::vector<std::vector<std::string>>& addresses() const { return addresses_; }
  // PIDs of the running workers (for tests and status).
  std::vector<pid_t> pids() const;
  // Ends every worker and the supervisor. Idempotent.
  void Stop();

 private:
  struct Worker {
    int stage = 0;
    int replica = 0;
    std::vector<std::string> args;  // Without --listen and --instance_id.
    std::string instance;           // Instance id prefix; each start adds a number.
    int starts = 0;
    int port = 0;
    pid_t pid = 0;
    int stdout_fd = -1;
  };

  LocalWorkers() = default;
  // Starts `worker` on `port` (0: any) and reads its port line.
  static absl::Status Spawn(const std::string& binary, Worker& worker, int port);
  // Waits for worker `index` to exit and restarts it, until Stop().
  void Supervise(size_t index);

  std::string binary_;
  std::vector<std::vector<std::string>> addresses_;
  std::vector<std::thread> supervisors_;  // One per worker.

  mutable absl::Mutex mu_;
  std::vector<Worker> workers_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
};

// Where the stage_worker binary is when none is given: next to this program (a
// flat install), else where a Bazel output tree puts it
// (bazel-bin/stage_worker/stage_worker, or the runfiles tree).
std::string DefaultWorkerBinary();

}  // namespace omnistage

#endif  // OMNISTAGE_ORCHESTRATOR_REPLICAS_LOCAL_WORKERS_H_
