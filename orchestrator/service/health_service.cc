#include "orchestrator/service/health_service.h"

#include <memory>
#include <string>
#include <utility>

#include "absl/synchronization/mutex.h"
#include "common/stream_writer.h"

namespace omnistage {
namespace {

using grpc::health::v1::HealthCheckResponse;

bool Known(const std::string& service) {
  return service.empty() || service == OrchestratorHealth::kReadinessService;
}

// On the loop.
HealthCheckResponse::ServingStatus StatusOf(const PipelineCore& core, const std::string& service) {
  if (service.empty() || core.Ready()) return HealthCheckResponse::SERVING;
  return HealthCheckResponse::NOT_SERVING;
}

// One Watch call: its writer and the periodic look live in a shared state that
// outlives the reactor; once the writer has finished the stream nothing touches
// the reactor again.
class WatchReactor final : public grpc::ServerWriteReactor<HealthCheckResponse>,
                           public StreamWriter<HealthCheckResponse>::Transport {
 public:
  WatchReactor(grpc::CallbackServerContext* context, PipelineCore* core, EventLoop* loop,
               std::string service)
      : context_(context), state_(std::make_shared<State>(this, core, loop, std::move(service))) {
    loop->Post([state = state_] { Look(state); });
  }

  // StreamWriter's transport.
  void BeginWrite(const HealthCheckResponse* response) override { StartWrite(response); }
  void FinishStream(const absl::Status& status) override {
    Finish(grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                        std::string(status.message())));
  }
  void CancelStream() override { context_->TryCancel(); }

  // Reactor.
  void OnWriteDone(bool ok) override { state_->writer.OnWriteDone(ok); }
  void OnCancel() override { state_->writer.End(absl::CancelledError("watch cancelled")); }
  void OnDone() override { delete this; }

 private:
  struct State {
    State(WatchReactor* reactor, PipelineCore* core, EventLoop* loop, std::string service)
        : writer(reactor, {}), core(core), loop(loop), service(std::move(service)) {}
    StreamWriter<HealthCheckResponse> writer;
    PipelineCore* const core;
    EventLoop* const loop;
    const std::string service;
    // Loop-owned.
    HealthCheckResponse::ServingStatus last = HealthCheckResponse::UNKNOWN;
  };

  // On the loop: sends the status if it changed, and looks again in a second
  // unless the stream has ended.
  static void Look(const std::shared_ptr<State>& state) {
    if (state->writer.ending()) return;
    const HealthCheckResponse::ServingStatus now = StatusOf(*state->core, state->service);
    if (now != state->last) {
      state->last = now;
      HealthCheckResponse response;
      response.set_status(now);
      state->writer.Write(std::move(response));
    }
    state->loop->PostAfter(absl::Seconds(1), [state] { Look(state); });
  }

  grpc::CallbackServerContext* const context_;
  const std::shared_ptr<State> state_;
};

}  // namespace

grpc::ServerUnaryReactor* OrchestratorHealth::Check(
    grpc::CallbackServerContext* context, const grpc::health::v1::HealthCheckRequest* request,
    grpc::health::v1::HealthCheckResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (!Known(request->service())) {
    reactor->Finish(grpc::Status(grpc::StatusCode::NOT_FOUND,
                                 "unknown service '" + request->service() + "'"));
    return reactor;
  }
  // Answered from the loop: if the loop is stuck, nothing answers.
  loop_->Post([core = core_, service = request->service(), response, reactor] {
    response->set_status(StatusOf(*core, service));
    reactor->Finish(grpc::Status::OK);
  });
  return reactor;
}

grpc::ServerWriteReactor<grpc::health::v1::HealthCheckResponse>* OrchestratorHealth::Watch(
    grpc::CallbackServerContext* context, const grpc::health::v1::HealthCheckRequest* request) {
  if (!Known(request->service())) {
    // A watch of an unknown service reports SERVICE_UNKNOWN (the health spec).
    class Unknown final : public grpc::ServerWriteReactor<HealthCheckResponse> {
     public:
      Unknown() {
        response_.set_status(HealthCheckResponse::SERVICE_UNKNOWN);
        StartWriteAndFinish(&response_, {}, grpc::Status::OK);
      }
      void OnDone() override { delete this; }

     private:
      HealthCheckResponse response_;
    };
    return new Unknown();
  }
  return new WatchReactor(context, core_, loop_, request->service());
}

}  // namespace omnistage
