// The asynchronous-API relay (relay_server.h): every call is a small state
// machine driven by the thread that polls its completion queue; the call's
// upstream call to the baseline server completes on the same queue, so one
// thread reads a response, writes it and sees the write done.
#include <atomic>
#include <chrono>
#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "common/grpc/service_process.h"
#include "common/host_port.h"
#include "common/listening_line.h"
#include "grpcpp/grpcpp.h"
#include "protos/orchestrator.grpc.pb.h"
#include "tests/bench/relay_server.h"

namespace omnistage {
namespace bench {
namespace {

// Calls waiting for a client on each completion queue.
constexpr int kListeningCallsPerQueue = 16;

struct Shared {
  v1::Orchestrator::AsyncService service;
  std::unique_ptr<v1::Orchestrator::Stub> stub;
  std::atomic<bool> stopping{false};  // No call waits for the next client any more.
  std::atomic<int> calls{0};          // Calls that exist, waiting for a client or not.
};

// One relayed call, touched only by the thread polling its queue: no lock.
class Call {
 public:
  Call(Shared* shared, grpc::ServerCompletionQueue* cq) : shared_(shared), cq_(cq) {
    shared_->calls.fetch_add(1, std::memory_order_relaxed);
    for (int op = 0; op < kOps; ++op) tags_[op] = {this, static_cast<Op>(op)};
    // Asked before the call starts; its tag comes back only if it does start.
    server_context_.AsyncNotifyWhenDone(&tags_[kDone]);
    shared_->service.RequestGenerate(&server_context_, &request_, &writer_, cq_, cq_,
                                     &tags_[kAccepted]);
  }

  // What a completion-queue tag names: a call and which of its operations ended.
  enum Op { kAccepted, kDone, kUpstreamStarted, kRead, kWrite, kUpstreamFinished, kFinished, kOps };
  struct Tag {
    Call* call;
    Op op;
  };

  // Runs operation `op`'s completion; may delete the call.
  void Proceed(Op op, bool ok) {
    if (op == kAccepted) {
      if (!ok) {  // The server is shutting down: this call never started.
        delete this;
        return;
      }
      if (!shared_->stopping.load()) new Call(shared_, cq_);
      outstanding_ = 1;  // kDone, asked for in the constructor.
      StartUpstream();
      return;
    }
    --outstanding_;
    switch (op) {
      case kDone:
        if (server_context_.IsCancelled()) upstream_context_.TryCancel();
        break;
      case kUpstreamStarted:
        if (ok) {
          ReadUpstream();
        } else {
          FinishUpstream();
        }
        break;
      case kRead:
        if (!ok) {
          FinishUpstream();
          break;
        }
        pending_.push_back(std::move(incoming_));
        incoming_.Clear();
        if (!writing_ && !finishing_) WriteFront();
        ReadUpstream();
        break;
      case kWrite:
        writing_ = false;
        pending_.pop_front();
        if (!ok) {
          upstream_context_.TryCancel();
          FinishServer(grpc::Status(grpc::StatusCode::CANCELLED, "client went away"));
        } else if (!pending_.empty()) {
          WriteFront();
        } else if (upstream_done_) {
          FinishServer(upstream_status_);
        }
        break;
      case kUpstreamFinished:
        upstream_done_ = true;
        if (!writing_ && !finishing_) FinishServer(upstream_status_);
        break;
      default:
        break;
    }
    if (outstanding_ == 0) delete this;
  }

 private:
  ~Call() { shared_->calls.fetch_sub(1, std::memory_order_relaxed); }

  void StartUpstream() {
    upstream_ = shared_->stub->PrepareAsyncGenerate(&upstream_context_, request_, cq_);
    ++outstanding_;
    upstream_->StartCall(&tags_[kUpstreamStarted]);
  }
  void ReadUpstream() {
    ++outstanding_;
    upstream_->Read(&incoming_, &tags_[kRead]);
  }
  void FinishUpstream() {
    ++outstanding_;
    upstream_->Finish(&upstream_status_, &tags_[kUpstreamFinished]);
  }
  void WriteFront() {
    writing_ = true;
    ++outstanding_;
    writer_.Write(pending_.front(), &tags_[kWrite]);
  }
  void FinishServer(const grpc::Status& status) {
    finishing_ = true;
    ++outstanding_;
    writer_.Finish(status, &tags_[kFinished]);
  }

  Shared* const shared_;
  grpc::ServerCompletionQueue* const cq_;
  Tag tags_[kOps];
  grpc::ServerContext server_context_;
  v1::GenerateRequest request_;
  grpc::ServerAsyncWriter<v1::GenerateResponse> writer_{&server_context_};
  grpc::ClientContext upstream_context_;
  std::unique_ptr<grpc::ClientAsyncReader<v1::GenerateResponse>> upstream_;
  v1::GenerateResponse incoming_;
  grpc::Status upstream_status_;
  std::deque<v1::GenerateResponse> pending_;  // Front: being written.
  int outstanding_ = 0;                       // Operations whose tags are still to come.
  bool writing_ = false;
  bool finishing_ = false;
  bool upstream_done_ = false;
};

}  // namespace

int RunAsyncRelay(const std::string& upstream, int threads) {
  StopSignals signals;
  Shared shared;
  shared.stub = v1::Orchestrator::NewStub(
      grpc::CreateChannel(upstream, grpc::InsecureChannelCredentials()));
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.RegisterService(&shared.service);
  std::vector<std::unique_ptr<grpc::ServerCompletionQueue>> queues;
  for (int i = 0; i < threads; ++i) queues.push_back(builder.AddCompletionQueue());
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) return StartRefused("relay", "cannot listen on 127.0.0.1:0");
  for (auto& cq : queues) {
    for (int i = 0; i < kListeningCallsPerQueue; ++i) new Call(&shared, cq.get());
  }
  std::vector<std::thread> pollers;
  for (auto& cq : queues) {
    pollers.emplace_back([cq = cq.get()] {
      void* tag = nullptr;
      bool ok = false;
      while (cq->Next(&tag, &ok)) {
        Call::Tag* t = static_cast<Call::Tag*>(tag);
        t->call->Proceed(t->op, ok);
      }
    });
  }
  PrintListeningLine({port, FormatHostPort("127.0.0.1", port), {}});
  signals.Wait();
  // The calls still running are cancelled, those waiting for a client end
  // unstarted; a queue is shut down only once no call is left to start another
  // operation on it.
  shared.stopping.store(true);
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  const absl::Time deadline = absl::Now() + absl::Seconds(5);
  while (shared.calls.load() > 0 && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(5));
  for (auto& cq : queues) cq->Shutdown();
  for (std::thread& poller : pollers) poller.join();
  return 0;
}

}  // namespace bench
}  // namespace omnistage
