// GrpcReplicaClient: the ReplicaClient of one stage worker replica over gRPC.
//
// It keeps one Connect session (callback API) to the worker: Hello, then Ready
// (-> listener OnReplicaReady), commands with increasing seq, step outputs and
// rejections (-> listener), utility results by call id. When the session ends
// (stream error, worker exit, keepalive timeout, fatal event) it reports
// OnReplicaDown and reconnects with exponential backoff; a worker that answers
// again comes back through OnReplicaReady with its (new) instance id. Abort is a
// unary call fenced after the last command sent on the session.
//
// Threading: Start(), the ReplicaClient methods and every callback run on the
// orchestrator's event loop. Shutdown() runs on any thread after the loop has
// stopped, and waits for gRPC to be done with this object.
#ifndef OMNISTAGE_ORCHESTRATOR_GRPC_REPLICA_CLIENT_H_
#define OMNISTAGE_ORCHESTRATOR_GRPC_REPLICA_CLIENT_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/event_loop.h"
#include "grpcpp/grpcpp.h"
#include "orchestrator/replica_client.h"
#include "protos/stage_worker.grpc.pb.h"

namespace omnistage {

struct ReplicaClientOptions {
  int stage = 0;
  int replica = 0;
  std::string address;
  absl::Duration keepalive_time = absl::Seconds(2);
  absl::Duration keepalive_timeout = absl::Seconds(1);
  absl::Duration reconnect_initial_backoff = absl::Milliseconds(100);
  absl::Duration reconnect_max_backoff = absl::Seconds(5);
  // Unary Abort and utility calls fail after this.
  absl::Duration call_timeout = absl::Seconds(5);
};

class GrpcReplicaClient : public ReplicaClient {
 public:
  // Events go to the listener set with set_listener() before Start().
  GrpcReplicaClient(ReplicaClientOptions options, EventLoop* loop);
  ~GrpcReplicaClient() override;

  void set_listener(ReplicaListener* listener) { listener_ = listener; }
  // Opens the first session (on the loop).
  void Start();
  // Cancels the session and in-flight calls and waits until gRPC no longer
  // calls into this object. Call after the event loop has stopped.
  void Shutdown();

  absl::Status Add(v1::AddRequest request) override;
  absl::Status AppendInput(v1::AppendInput input) override;
  void CallUtility(const std::string& name, const google::protobuf::ListValue& args,
                   std::function<void(absl::StatusOr<google::protobuf::Value>)> done) override;
  void Abort(const std::vector<std::string>& ids, std::function<void(absl::Status)> done) override;

 private:
  class Session;

  // Loop thread.
  void Connect();
  void OnEvent(Session* session, v1::WorkerEvent event);
  void OnSessionDone(Session* session, const absl::Status& status);
  absl::Status Send(v1::WorkerCommand command);
  void FailUtilities(const absl::Status& status);

  const ReplicaClientOptions options_;
  EventLoop* const loop_;
  ReplicaListener* listener_ = nullptr;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::StageWorker::Stub> stub_;

  // Loop-owned.
  std::shared_ptr<Session> session_;  // The current session, if any.
  bool ready_ = false;                // Ready received on session_.
  std::string session_id_;
  uint64_t seq_ = 0;                  // Last seq sent on session_.
  uint64_t next_call_id_ = 1;
  std::map<uint64_t, std::function<void(absl::StatusOr<google::protobuf::Value>)>> utilities_;
  absl::Duration backoff_;
  bool shut_down_ = false;

  // Work gRPC still owes us: sessions not yet done and unary calls in flight.
  absl::Mutex mu_;
  int outstanding_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<uint64_t, grpc::ClientContext*> calls_ ABSL_GUARDED_BY(mu_);
  uint64_t next_call_key_ ABSL_GUARDED_BY(mu_) = 1;
  std::shared_ptr<Session> live_session_ ABSL_GUARDED_BY(mu_);
};

}  // namespace omnistage

#endif  // OMNISTAGE_ORCHESTRATOR_GRPC_REPLICA_CLIENT_H_
