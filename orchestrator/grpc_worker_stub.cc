#include "orchestrator/grpc_worker_stub.h"

#include <utility>
#include <vector>

#include "common/grpc_util.h"
#include "common/stream_writer.h"

namespace omnistage {
namespace {

// What Connect returns once the stub is shut down: refuses every write.
class ClosedStream : public WorkerStream {
 public:
  absl::Status Write(v1::WorkerCommand&& command) override {
    return absl::UnavailableError("the orchestrator is shutting down");
  }
  void Close() override {}
  void Cancel() override {}
};

}  // namespace

// One Connect stream. Holds itself alive until gRPC's OnDone; a hold keeps OnDone
// from coming before the writer finished its side (Close(), or the stream
// breaking), so writes from the loop stay legal until then.
class GrpcWorkerStub::ConnectCall
    : public grpc::ClientBidiReactor<v1::WorkerCommand, v1::WorkerEvent>,
      public WorkerStream,
      public StreamWriter<v1::WorkerCommand>::Transport,
      public std::enable_shared_from_this<ConnectCall> {
 public:
  ConnectCall(GrpcWorkerStub* stub, EventCallback on_event, DoneCallback on_done)
      : stub_(stub),
        on_event_(std::move(on_event)),
        on_done_(std::move(on_done)),
        writer_(this, WriterOptions()) {}

  void Begin() {
    self_ = shared_from_this();
    stub_->stub_->async()->Connect(&context_, this);
    AddHold();
    StartRead(&event_);
    StartCall();
  }

  // WorkerStream (event loop).
  absl::Status Write(v1::WorkerCommand&& command) override {
    if (writer_.Write(std::move(command))) return absl::OkStatus();
    return absl::UnavailableError("session closed");
  }
  void Close() override { writer_.End(absl::OkStatus()); }
  void Cancel() override { context_.TryCancel(); }

  // StreamWriter's transport. The client side "finishes" by letting go of the
  // hold: the stream ends when the worker ends it.
  void BeginWrite(const v1::WorkerCommand* command) override { StartWrite(command); }
  void FinishStream(const absl::Status& status) override { RemoveHold(); }
  void CancelStream() override { context_.TryCancel(); }

  // Reactor (gRPC threads).
  void OnWriteDone(bool ok) override { writer_.OnWriteDone(ok); }

  void OnReadDone(bool ok) override {
    if (!ok) {
      writer_.End(absl::OkStatus());  // The stream is over: stop writing.
      return;
    }
    auto event = std::make_shared<v1::WorkerEvent>(std::move(event_));
    event_.Clear();
    stub_->loop_->Post([self = shared_from_this(), event] { self->on_event_(std::move(*event)); });
    StartRead(&event_);
  }

  void OnDone(const grpc::Status& status) override {
    std::shared_ptr<ConnectCall> self = std::move(self_);
    stub_->loop_->Post([self, status = FromGrpcStatus(status)] { self->on_done_(status); });
    absl::MutexLock lock(&stub_->mu_);
    stub_->streams_.erase(self);
  }

 private:
  static StreamWriter<v1::WorkerCommand>::Options WriterOptions() {
    StreamWriter<v1::WorkerCommand>::Options options;
    options.label = "session";
    return options;
  }

  GrpcWorkerStub* const stub_;
  const EventCallback on_event_;
  const DoneCallback on_done_;
  grpc::ClientContext context_;
  v1::WorkerEvent event_;
  std::shared_ptr<ConnectCall> self_;
  StreamWriter<v1::WorkerCommand> writer_;
};

GrpcWorkerStub::GrpcWorkerStub(const WorkerChannelOptions& options, Scheduler* loop)
    : loop_(loop) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, absl::ToInt64Milliseconds(options.keepalive_time));
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, absl::ToInt64Milliseconds(options.keepalive_timeout));
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  // Reconnect promptly; the session's own backoff paces its attempts.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS,
              absl::ToInt64Milliseconds(options.reconnect_initial_backoff));
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS,
              absl::ToInt64Milliseconds(options.reconnect_max_backoff));
  args.SetMaxReceiveMessageSize(64 << 20);
  if (!options.tls_name.empty()) args.SetSslTargetNameOverride(options.tls_name);
  channel_ = grpc::CreateCustomChannel(
      options.address,
      options.credentials != nullptr ? options.credentials : grpc::InsecureChannelCredentials(),
      args);
  stub_ = v1::StageWorker::NewStub(channel_);
}

GrpcWorkerStub::~GrpcWorkerStub() { Shutdown(); }

std::shared_ptr<WorkerStream> GrpcWorkerStub::Connect(EventCallback on_event,
                                                      DoneCallback on_done) {
  auto call = std::make_shared<ConnectCall>(this, std::move(on_event), std::move(on_done));
  {
    absl::MutexLock lock(&mu_);
    if (shut_down_) return std::make_shared<ClosedStream>();  // No callback comes.
    streams_.insert(call);
  }
  call->Begin();
  return call;
}

void GrpcWorkerStub::Abort(const v1::WorkerAbortRequest& request, absl::Time deadline,
                           std::function<void(absl::StatusOr<v1::WorkerAbortResponse>)> done) {
  struct Call {
    grpc::ClientContext context;
    v1::WorkerAbortRequest request;
    v1::WorkerAbortResponse response;
  };
  auto call = std::make_shared<Call>();
  call->request = request;
  if (deadline != absl::InfiniteFuture()) call->context.set_deadline(absl::ToChronoTime(deadline));
  uint64_t key;
  {
    absl::MutexLock lock(&mu_);
    if (shut_down_) {
      done(absl::UnavailableError("the orchestrator is shutting down"));
      return;
    }
    key = next_call_++;
    calls_[key] = &call->context;
  }
  stub_->async()->Abort(
      &call->context, &call->request, &call->response,
      [this, call, key, done = std::move(done)](grpc::Status status) {
        absl::StatusOr<v1::WorkerAbortResponse> result =
            status.ok() ? absl::StatusOr<v1::WorkerAbortResponse>(call->response)
                        : absl::StatusOr<v1::WorkerAbortResponse>(FromGrpcStatus(status));
        loop_->Post([done, result = std::move(result)] { done(result); });
        absl::MutexLock lock(&mu_);
        calls_.erase(key);
      });
}

void GrpcWorkerStub::Shutdown() {
  std::vector<std::shared_ptr<ConnectCall>> streams;
  {
    absl::MutexLock lock(&mu_);
    shut_down_ = true;
    streams.assign(streams_.begin(), streams_.end());
    for (auto& [key, context] : calls_) context->TryCancel();
  }
  for (const auto& stream : streams) {
    stream->Cancel();
    stream->Close();
  }
  streams.clear();
  absl::MutexLock lock(&mu_);
  auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return streams_.empty() && calls_.empty();
  };
  mu_.Await(absl::Condition(&idle));
}

}  // namespace omnistage
