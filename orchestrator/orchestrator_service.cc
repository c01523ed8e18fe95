#include "orchestrator/orchestrator_service.h"

#include <algorithm>
#include <functional>
#include <memory>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/grpc_util.h"

namespace omnistage {
namespace {

// The response side of one Generate call. Owns the write queue; the reactor is
// only its transport. Each method decides under the lock what the reactor must
// do and does it after unlocking (reactions may run inline). Once `finished_` is
// set nothing touches the reactor again, so it may be gone.
class ClientStream : public ResponseSink, public std::enable_shared_from_this<ClientStream> {
 public:
  ClientStream(grpc::ServerWriteReactor<v1::GenerateResponse>* reactor, PipelineCore* core,
               EventLoop* loop)
      : reactor_(reactor), core_(core), loop_(loop) {}

  // ResponseSink (event loop).
  void Started(const std::string& request_id) override {
    bool cancelled;
    {
      absl::MutexLock lock(&mu_);
      request_id_ = request_id;
      pending_.set_request_id(request_id);
      cancelled = cancelled_;
    }
    if (cancelled) core_->Cancel(request_id, this);
  }

  void Send(const std::string& request_id, std::vector<v1::OutputChunk> chunks) override {
    Action action;
    {
      absl::MutexLock lock(&mu_);
      if (finished_ || terminal_queued_) return;
      for (v1::OutputChunk& chunk : chunks) {
        pending_bytes_ += chunk.ByteSizeLong();
        *pending_.add_outputs() = std::move(chunk);
      }
      action = NextLocked();
    }
    Do(action);
  }

  void Finish(const std::string& request_id, v1::Terminal terminal) override {
    Action action;
    {
      absl::MutexLock lock(&mu_);
      if (finished_ || terminal_queued_) return;
      *pending_.mutable_terminal() = std::move(terminal);
      terminal_queued_ = true;
      action = NextLocked();
    }
    Do(action);
  }

  void Fail(const absl::Status& status) override {
    {
      absl::MutexLock lock(&mu_);
      if (finished_ || writing_ || terminal_queued_) return;
      finished_ = true;
    }
    reactor_->Finish(ToGrpcStatus(status));
  }

  // Reactor callbacks (gRPC threads).
  void OnWriteDone(bool ok) {
    Action action;
    {
      absl::MutexLock lock(&mu_);
      writing_ = false;
      if (!ok) {
        // The client is gone; OnCancel takes care of the request.
        finished_ = true;
        action.finish = true;
        action.status = grpc::Status(grpc::StatusCode::CANCELLED, "client went away");
      } else if (in_flight_.has_terminal()) {
        finished_ = true;
        action.finish = true;
      } else {
        action = NextLocked();
      }
    }
    Do(action);
  }

  void OnCancel() {
    std::string id;
    {
      absl::MutexLock lock(&mu_);
      cancelled_ = true;
      id = request_id_;
    }
    if (id.empty()) return;  // Started() will see `cancelled_`.
    loop_->Post([self = shared_from_this(), id] { self->core_->Cancel(id, self.get()); });
  }

 private:
  struct Action {
    const v1::GenerateResponse* write = nullptr;
    bool finish = false;
    grpc::Status status;
  };

  // Moves what is pending into a write, if none is in flight. Chunks that queued
  // during the previous write go out together as one response, up to about
  // kMaxResponseBytes (clients' default receive limit is 4 MiB); the rest waits
  // for the next write, and the terminal goes with the last chunks.
  Action NextLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    Action action;
    if (writing_ || finished_) return action;
    if (pending_.outputs_size() == 0 && !pending_.has_terminal()) return action;
    if (pending_bytes_ <= kMaxResponseBytes) {
      in_flight_ = std::move(pending_);
      pending_.Clear();
      pending_.set_request_id(request_id_);
      pending_bytes_ = 0;
    } else {
      in_flight_.Clear();
      in_flight_.set_request_id(request_id_);
      size_t bytes = 0;
      int taken = 0;
      while (taken < pending_.outputs_size() && (taken == 0 || bytes < kMaxResponseBytes)) {
        bytes += pending_.outputs(taken).ByteSizeLong();
        ++taken;
      }
      for (int i = 0; i < taken; ++i) *in_flight_.add_outputs() = std::move(*pending_.mutable_outputs(i));
      pending_.mutable_outputs()->DeleteSubrange(0, taken);
      pending_bytes_ -= std::min(bytes, pending_bytes_);
      if (pending_.outputs_size() == 0 && pending_.has_terminal()) {
        *in_flight_.mutable_terminal() = std::move(*pending_.mutable_terminal());
        pending_.clear_terminal();
      }
    }
    writing_ = true;
    action.write = &in_flight_;
    return action;
  }

  void Do(const Action& action) {
    if (action.write != nullptr) reactor_->StartWrite(action.write);
    if (action.finish) reactor_->Finish(action.status);
  }

  grpc::ServerWriteReactor<v1::GenerateResponse>* const reactor_;
  PipelineCore* const core_;
  EventLoop* const loop_;

  static constexpr size_t kMaxResponseBytes = 1 << 20;

  absl::Mutex mu_;
  std::string request_id_ ABSL_GUARDED_BY(mu_);
  v1::GenerateResponse pending_ ABSL_GUARDED_BY(mu_);
  size_t pending_bytes_ ABSL_GUARDED_BY(mu_) = 0;  // Of pending_'s outputs.
  // Written under mu_ only while no write is in flight; read by the write.
  v1::GenerateResponse in_flight_;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool terminal_queued_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
};

class GenerateReactor final : public grpc::ServerWriteReactor<v1::GenerateResponse> {
 public:
  GenerateReactor(PipelineCore* core, EventLoop* loop, v1::GenerateRequest request)
      : stream_(std::make_shared<ClientStream>(this, core, loop)) {
    loop->Post([core, stream = stream_, request = std::move(request)]() mutable {
      core->Generate(std::move(request), stream);
    });
  }
  void OnWriteDone(bool ok) override { stream_->OnWriteDone(ok); }
  void OnCancel() override { stream_->OnCancel(); }
  void OnDone() override { delete this; }

 private:
  const std::shared_ptr<ClientStream> stream_;
};

// A callback that finishes a unary call with `result`'s value or its error.
template <typename Response>
std::function<void(absl::StatusOr<Response>)> FinishWith(grpc::ServerUnaryReactor* reactor,
                                                         Response* response) {
  return [reactor, response](absl::StatusOr<Response> result) {
    if (!result.ok()) {
      reactor->Finish(ToGrpcStatus(result.status()));
      return;
    }
    *response = *std::move(result);
    reactor->Finish(grpc::Status::OK);
  };
}

}  // namespace

grpc::ServerWriteReactor<v1::GenerateResponse>* OrchestratorService::Generate(
    grpc::CallbackServerContext* context, const v1::GenerateRequest* request) {
  return new GenerateReactor(core_, loop_, *request);
}

grpc::ServerUnaryReactor* OrchestratorService::Abort(grpc::CallbackServerContext* context,
                                                     const v1::AbortRequest* request,
                                                     v1::AbortResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  loop_->Post([core = core_, request, response, reactor] {
    core->Abort(*request, FinishWith(reactor, response));
  });
  return reactor;
}

grpc::ServerUnaryReactor* OrchestratorService::GetPipelineStatus(
    grpc::CallbackServerContext* context, const v1::PipelineStatusRequest* request,
    v1::PipelineStatus* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  loop_->Post([core = core_, response, reactor] {
    *response = core->Status();
    reactor->Finish(grpc::Status::OK);
  });
  return reactor;
}

grpc::ServerUnaryReactor* OrchestratorService::CallStageUtility(
    grpc::CallbackServerContext* context, const v1::StageUtilityRequest* request,
    v1::StageUtilityResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  loop_->Post([core = core_, request, response, reactor] {
    core->CallStageUtility(*request, FinishWith(reactor, response));
  });
  return reactor;
}

}  // namespace omnistage
