// The callback-API relay (relay_server.h): one server reactor per client call,
// one client reactor for its upstream call to the baseline server.
#include <atomic>
#include <deque>
#include <memory>
#include <string>

#include "absl/synchronization/mutex.h"
#include "common/grpc/grpc_util.h"
#include "common/grpc/service_process.h"
#include "common/host_port.h"
#include "common/listening_line.h"
#include "grpcpp/grpcpp.h"
#include "protos/orchestrator.grpc.pb.h"
#include "tests/bench/relay_server.h"

namespace omnistage {
namespace bench {
namespace {

// One relayed call. Deletes itself once both its server side and its upstream
// call are done. Start* is never called under mu_.
class RelayCall final : public grpc::ServerWriteReactor<v1::GenerateResponse> {
 public:
  RelayCall(v1::Orchestrator::Stub* stub, const v1::GenerateRequest& request)
      : upstream_(this, request) {
    stub->async()->Generate(&upstream_.context, &upstream_.request, &upstream_);
    upstream_.StartRead(&upstream_.incoming);
    upstream_.StartCall();
  }

  void OnWriteDone(bool ok) override {
    const v1::GenerateResponse* next = nullptr;
    bool finish = false;
    grpc::Status status;
    {
      absl::MutexLock lock(&mu_);
      pending_.pop_front();
      if (!ok) {
        writing_ = false;
        finish = !finished_;
        finished_ = true;
        status = grpc::Status(grpc::StatusCode::CANCELLED, "client went away");
      } else if (!pending_.empty()) {
        next = &pending_.front();
      } else {
        writing_ = false;
        finish = upstream_done_ && !finished_;
        finished_ = finished_ || finish;
        status = status_;
      }
    }
    if (!ok) upstream_.context.TryCancel();
    if (next != nullptr) StartWrite(next);
    if (finish) Finish(status);
  }

  void OnCancel() override { upstream_.context.TryCancel(); }
  void OnDone() override { Release(); }

 private:
  struct Upstream final : grpc::ClientReadReactor<v1::GenerateResponse> {
    Upstream(RelayCall* call, const v1::GenerateRequest& request) : call(call), request(request) {}
    void OnReadDone(bool ok) override { call->Read(ok); }
    void OnDone(const grpc::Status& status) override { call->UpstreamDone(status); }

    RelayCall* const call;
    grpc::ClientContext context;
    const v1::GenerateRequest request;
    v1::GenerateResponse incoming;
  };

  // A response read from upstream (ok), or the end of its responses.
  void Read(bool ok) {
    if (!ok) return;  // UpstreamDone follows.
    const v1::GenerateResponse* write = nullptr;
    {
      absl::MutexLock lock(&mu_);
      pending_.push_back(std::move(upstream_.incoming));
      if (!writing_ && !finished_) {
        writing_ = true;
        write = &pending_.back();  // Stays put: a deque's push_back moves no element.
      }
    }
    upstream_.incoming.Clear();
    if (write != nullptr) StartWrite(write);
    upstream_.StartRead(&upstream_.incoming);
  }

  void UpstreamDone(const grpc::Status& status) {
    bool finish = false;
    {
      absl::MutexLock lock(&mu_);
      upstream_done_ = true;
      status_ = status;
      finish = !writing_ && !finished_;
      finished_ = finished_ || finish;
    }
    if (finish) Finish(status);
    Release();
  }

  void Release() {
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }

  Upstream upstream_;
  std::atomic<int> refs_{2};  // The server side and the upstream call.
  absl::Mutex mu_;
  std::deque<v1::GenerateResponse> pending_ ABSL_GUARDED_BY(mu_);  // Front: being written.
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool upstream_done_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status status_ ABSL_GUARDED_BY(mu_);
};

class CallbackRelayService final : public v1::Orchestrator::CallbackService {
 public:
  explicit CallbackRelayService(const std::string& upstream)
      : stub_(v1::Orchestrator::NewStub(
            grpc::CreateChannel(upstream, grpc::InsecureChannelCredentials()))) {}

  grpc::ServerWriteReactor<v1::GenerateResponse>* Generate(
      grpc::CallbackServerContext* context, const v1::GenerateRequest* request) override {
    return new RelayCall(stub_.get(), *request);
  }

 private:
  std::unique_ptr<v1::Orchestrator::Stub> stub_;
};

}  // namespace

int RunCallbackRelay(const std::string& upstream) {
  StopSignals signals;
  CallbackRelayService service(upstream);
  absl::StatusOr<StartedServer> server = StartGrpcServer(GrpcServerOptions(), {&service});
  if (!server.ok()) return StartRefused("relay", server.status().message());
  PrintListeningLine({server->port, FormatHostPort("127.0.0.1", server->port), {}});
  signals.Wait();
  server->server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  return 0;
}

}  // namespace bench
}  // namespace omnistage
