// GrpcWorkerStub: the WorkerStub of one stage worker over a gRPC channel
// (callback API), with HTTP/2 keepalive so a worker that stops answering is
// detected. Stream events and call completions run on the event loop: a small
// event or an Abort's answer on the gRPC thread that read it when the loop is
// free (EventLoop::RunOrPost), the rest posted to the loop's thread.
//
// Threading: Connect and Abort run on the event loop; gRPC's threads hand their
// work to it.
// Shutdown() runs once the loop has stopped and waits until gRPC no longer calls
// into this object.
#ifndef OMNISTAGE_ORCHESTRATOR_REPLICAS_GRPC_WORKER_STUB_H_
#define OMNISTAGE_ORCHESTRATOR_REPLICAS_GRPC_WORKER_STUB_H_

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/scheduler.h"
#include "grpcpp/grpcpp.h"
#include "orchestrator/replicas/worker_stub.h"
#include "protos/stage_worker.grpc.pb.h"

namespace omnistage {

struct WorkerChannelOptions {
  // host:port of the worker.
  std::string address;
  // TLS (or mTLS) credentials shared by every worker channel; null: plaintext.
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  // The name the worker's certificate must carry; empty: the host of `address`.
  std::string tls_name;
  absl::Duration keepalive_time = absl::Seconds(2);
  // A worker not answering a ping within this is gone: its streams break.
  absl::Duration keepalive_timeout = absl::Seconds(1);
  // gRPC's own reconnect pacing of the channel (the session's backoff is above it).
  absl::Duration reconnect_initial_backoff = absl::Milliseconds(100);
  absl::Duration reconnect_max_backoff = absl::Seconds(5);
};

class GrpcWorkerStub : public WorkerStub {
 public:
  // `loop` runs every callback; it must outlive this object's calls.
  GrpcWorkerStub(const WorkerChannelOptions& options, Scheduler* loop);
  ~GrpcWorkerStub() override;

  std::shared_ptr<WorkerStream> Connect(EventCallback on_event, DoneCallback on_done) override;
  void Abort(const v1::WorkerAbortRequest& request, absl::Time deadline,
             std::function<void(absl::StatusOr<v1::WorkerAbortResponse>)> done) override;
  void Shutdown() override;

 private:
  class ConnectCall;

  Scheduler* const loop_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::StageWorker::Stub> stub_;

  // What gRPC still owes us: streams not yet done and unary calls in flight.
  absl::Mutex mu_;
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
  std::set<std::shared_ptr<ConnectCall>> streams_ ABSL_GUARDED_BY(mu_);
  std::map<uint64_t, grpc::ClientContext*> calls_ ABSL_GUARDED_BY(mu_);
  uint64_t next_call_ ABSL_GUARDED_BY(mu_) = 1;
};

}  // namespace omnistage

#endif  // OMNISTAGE_ORCHESTRATOR_REPLICAS_GRPC_WORKER_STUB_H_
