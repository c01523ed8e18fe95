// DeferredUnaryReactor: a callback-API unary call answered later, from another
// thread, that still ends at once when it is cancelled first.
//
// gRPC's default unary reactor waits for its Finish whatever happens to the
// call: a server that shuts down waits for every such call, and so for
// whatever is to answer it. This one finishes a cancelled call with CANCELLED
// on its own (a client that left, a server shutting down), and drops the
// answer that comes after (without touching the call's response, which gRPC
// may have freed by then). It stays allocated until both gRPC and the answer
// are done with it.
//
//   auto* reactor = new DeferredUnaryReactor();
//   worker.Abort(*request, [reactor, response](Result r) {
//     reactor->Answer([&] { /* fill *response */ return grpc::Status::OK; });
//   });
//   return reactor;
//
// Answer() is called exactly once. Thread-safe.
#ifndef OMNISTAGE_COMMON_GRPC_DEFERRED_UNARY_REACTOR_H_
#define OMNISTAGE_COMMON_GRPC_DEFERRED_UNARY_REACTOR_H_

#include <atomic>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/grpcpp.h"

namespace omnistage {

class DeferredUnaryReactor final : public grpc::ServerUnaryReactor {
 public:
  DeferredUnaryReactor() = default;

  // Unless the call has already ended (cancelled), runs `fill` (which writes
  // the response and returns the status) and finishes the call with its
  // status.
  void Answer(absl::FunctionRef<grpc::Status()> fill) {
    bool finish;
    {
      absl::MutexLock lock(&mu_);
      finish = !finished_;
      finished_ = true;
    }
    if (finish) Finish(fill());
    Unref();
  }

  void OnCancel() override {
    {
      absl::MutexLock lock(&mu_);
      if (finished_) return;
      finished_ = true;
    }
    Finish(grpc::Status(grpc::StatusCode::CANCELLED, "the call was cancelled"));
  }

  void OnDone() override { Unref(); }

 private:
  void Unref() {
    if (refs_.fetch_sub(1) == 1) delete this;
  }

  // One for gRPC (until OnDone), one for the answer.
  std::atomic<int> refs_{2};
  absl::Mutex mu_;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace omnistage

#endif  // OMNISTAGE_COMMON_GRPC_DEFERRED_UNARY_REACTOR_H_
