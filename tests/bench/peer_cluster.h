// The processes of //tests/bench:peers_benchmark: stage workers it starts itself
// (one sim_llm stage, each worker on 127.0.0.1:0), and orchestrators that reach
// them by `addresses:` and, when there are several, each other by `peers:`.
//
//   auto workers = WorkerSet::Start(binaries, /*count=*/2, /*batch_size=*/4096,
//                                   /*step_time_us=*/1000);
//   ClusterOptions peers;
//   peers.orchestrators = 3;
//   auto cluster = PeerCluster::Start(binaries, dir, (*workers)->ports(), peers);
//   StreamingRequest victim((*cluster)->stub(0).get(), request);
//   (*cluster)->stub(1)->Abort(... victim.WaitStreaming(timeout) ...);
//
// Every process is a ChildProcess: stopped by PID (SIGTERM, then SIGKILL) when
// its owner goes away, also on failure, and killed by the kernel if the
// benchmark dies. Start both from the main thread (PR_SET_PDEATHSIG follows the
// starting thread). A cluster must go before the workers it uses.
#ifndef OMNISTAGE_TESTS_BENCH_PEER_CLUSTER_H_
#define OMNISTAGE_TESTS_BENCH_PEER_CLUSTER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "tests/bench/bench_processes.h"
#include "tests/bench/load_generator.h"
#include "tests/bench/scenarios.h"

namespace omnistage {
namespace bench {

class WorkerSet {
 public:
  // `count` sim_llm workers of stage 0; batch_size is each one's capacity.
  static absl::StatusOr<std::unique_ptr<WorkerSet>> Start(const Binaries& binaries, int count,
                                                          int batch_size, int64_t step_time_us);
  ~WorkerSet();
  const std::vector<int>& ports() const { return ports_; }

 private:
  WorkerSet() = default;
  std::vector<Server> workers_;
  std::vector<int> ports_;
};

struct ClusterOptions {
  // 1: one orchestrator alone (no `peers:`, no peer port).
  int orchestrators = 1;
  std::string pick = "round_robin";  // The stage's `pick:`.
};

class PeerCluster {
 public:
  // Writes the config into `dir` and starts the orchestrators; returns once each
  // sees every worker alive, reaches every peer, and has served one short
  // request (so that no measurement pays for connecting).
  static absl::StatusOr<std::unique_ptr<PeerCluster>> Start(const Binaries& binaries,
                                                            const std::string& dir,
                                                            const std::vector<int>& worker_ports,
                                                            const ClusterOptions& options);
  ~PeerCluster();

  int size() const { return static_cast<int>(members_.size()); }
  const std::shared_ptr<v1::Orchestrator::Stub>& stub(int i) const { return members_[i]->stub; }
  // The tag that ends the ids orchestrator `i` generates ("req-<hex>.<node>").
  const std::string& node_id(int i) const { return node_ids_[i]; }

 private:
  PeerCluster() = default;
  std::vector<std::unique_ptr<Pipeline>> members_;  // Pipeline: a server and its stub.
  std::vector<std::string> node_ids_;
};

// The config PeerCluster::Start writes: one sim_llm stage on `worker_ports`.
std::string PeerClusterYaml(const std::vector<int>& worker_ports,
                            const std::vector<int>& peer_ports, const std::string& pick);

// Runs streams[i] streams back to back for `run_for` through orchestrator i, all
// at once, and merges what they saw: tokens and requests summed, `seconds` the
// longest group's (they start within a millisecond of each other). Streams still
// running after `limit` are cancelled and `error` says so.
struct SplitLoad {
  LoadResult result;
  std::string error;
};
SplitLoad RunSplit(const PeerCluster& cluster, const std::vector<int>& streams,
                   absl::Duration run_for, const RequestFactory& make_request,
                   absl::Duration limit);

// One Generate, its id left to the orchestrator, read on a thread of its own:
// the generated id (it names the owner) once the request streams, and when its
// terminal came, timed while the caller may be blocked in another call (an
// Abort). The destructor cancels the call if it still runs, and joins.
class StreamingRequest {
 public:
  StreamingRequest(v1::Orchestrator::Stub* stub, v1::GenerateRequest request);
  ~StreamingRequest();
  StreamingRequest(const StreamingRequest&) = delete;
  StreamingRequest& operator=(const StreamingRequest&) = delete;

  // The id once an output has come; "" when the stream ended before one, or
  // none came within `timeout`.
  std::string WaitStreaming(absl::Duration timeout);
  // Whether the call ended within `timeout`; then the two below are final.
  bool WaitEnded(absl::Duration timeout);
  int64_t terminal_ns() const { return terminal_ns_; }  // NowNs(); 0: no terminal.
  v1::FinishReason finish_reason() const { return finish_reason_; }

 private:
  void Read(v1::Orchestrator::Stub* stub);

  const v1::GenerateRequest request_;
  grpc::ClientContext context_;
  // Written by the reading thread before the notification that publishes them.
  std::string id_;
  int64_t terminal_ns_ = 0;
  v1::FinishReason finish_reason_ = v1::FINISH_REASON_UNSPECIFIED;
  absl::Notification streaming_;
  absl::Notification ended_;
  std::thread thread_;  // Last: starts after everything above exists.
};

}  // namespace bench
}  // namespace omnistage

#endif  // OMNISTAGE_TESTS_BENCH_PEER_CLUSTER_H_
