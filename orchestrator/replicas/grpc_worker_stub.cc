#include "orchestrator/replicas/grpc_worker_stub.h"

#include <algorithm>
#include <atomic>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/grpc/channel_release.h"
#include "common/grpc/grpc_util.h"
#include "common/limits.h"
#include "common/stream_writer.h"
#include "google/protobuf/arena.h"

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

// One Connect stream. Holds itself alive until gRPC's OnDone. Two holds keep
// OnDone from coming too early, as the loop starts operations outside the
// reactions: one until the writer finished its side (Close(), or the stream
// breaking), so writes from the loop stay legal until then; one for the reads,
// which the loop starts after handling each event, until a read fails or
// Cancel() finds none in flight.
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
        writer_(this, WriterOptions(&batches_)) {}

  void Begin() {
    self_ = shared_from_this();
    stub_->stub_->async()->Connect(&context_, this);
    // One hold for the writes the loop starts, one for the reads it starts.
    AddMultipleHolds(2);
    {
      absl::MutexLock lock(&mu_);
      reading_ = true;
    }
    StartRead(NewEvent());
    StartCall();
  }

  // WorkerStream (event loop).
  absl::Status Write(v1::WorkerCommand&& command) override {
    if (writer_.Write(std::move(command))) return absl::OkStatus();
    return absl::UnavailableError("session closed");
  }
  void Close() override { writer_.End(absl::OkStatus()); }
  void Cancel() override {
    bool release;
    {
      absl::MutexLock lock(&mu_);
      stopped_ = true;
      // No read in flight (its event waits on the loop, or the loop stopped
      // with it queued): none will start, so none holds the stream open.
      release = TakeReadHoldLocked();
    }
    context_.TryCancel();
    if (release) RemoveHold();
  }

  // StreamWriter's transport. The client side "finishes" by letting go of the
  // hold: the stream ends when the worker ends it.
  void BeginWrite(const v1::WorkerCommand* command) override { StartWrite(command); }
  void FinishStream(const absl::Status& status) override { RemoveHold(); }
  void CancelStream() override { context_.TryCancel(); }

  // Reactor (gRPC threads).
  void OnWriteDone(bool ok) override { writer_.OnWriteDone(ok); }

  // Reads run ahead of the loop by at most kMaxUnhandledOutputs outputs (an
  // event without outputs counts as one): a loop behind on its work leaves the
  // worker's events in the transport, where flow control holds the worker's
  // writes back (and with them its steps: see the worker's backpressure) and
  // its session merges the steps that queue meanwhile, instead of a backlog
  // growing here.
  void OnReadDone(bool ok) override {
    bool release;
    bool read_on = false;
    int weight = 0;
    {
      absl::MutexLock lock(&mu_);
      reading_ = false;
      release = (!ok || stopped_) && TakeReadHoldLocked();
      if (ok && !release) {
        weight = Weight(*event_.message);
        unhandled_ += weight;
        read_on = unhandled_ < kMaxUnhandledOutputs;
        reading_ = read_on;
      }
    }
    if (release) RemoveHold();
    if (!ok) {
      writer_.End(absl::OkStatus());  // The stream is over: stop writing.
      return;
    }
    if (release) return;  // Cancelled: the event goes nowhere.
    if (event_.message->has_ready()) {
      const v1::Ready& ready = event_.message->ready();
      batches_.store(ready.accepts_command_batches() &&
                         ready.max_message_bytes() >= 2 * static_cast<int64_t>(kMaxBatchBytes),
                     std::memory_order_relaxed);
    }
    // The loop task owns the event's arena, and frees it in one go. A small
    // event (light load) runs here when the loop is free: the thread that read
    // it writes the clients' responses, without waking the loop's thread. A
    // large one (a busy worker) goes to the loop's thread, where the events
    // that pile up meanwhile fold into fewer client writes.
    auto handle = [self = shared_from_this(), event = std::move(event_), weight] {
      self->on_event_(*event.message);
      self->Handled(weight);
    };
    if (weight <= kMaxInlineOutputs) {
      stub_->loop_->RunOrPostBulk(std::move(handle));
    } else {
      stub_->loop_->PostBulk(std::move(handle));
    }
    if (read_on) StartRead(NewEvent());
  }

  void OnDone(const grpc::Status& status) override {
    std::shared_ptr<ConnectCall> self = std::move(self_);
    // Bulk, like the events: after the last of them.
    stub_->loop_->PostBulk([self, status = FromGrpcStatus(status)] { self->on_done_(status); });
    absl::MutexLock lock(&stub_->mu_);
    stub_->streams_.erase(self);
  }

 private:
  // On the loop, after an event was handled: resumes reading if it waited.
  void Handled(int weight) {
    bool start = false;
    bool release = false;
    {
      absl::MutexLock lock(&mu_);
      unhandled_ -= weight;
      if (stopped_) {
        release = TakeReadHoldLocked();
      } else if (!reading_ && !read_hold_released_ && unhandled_ < kMaxUnhandledOutputs) {
        start = reading_ = true;
      }
    }
    if (start) StartRead(NewEvent());
    if (release) RemoveHold();
  }

  // The next event is parsed on an arena of its own: its many small parts
  // (outputs, ids, payloads) cost no allocation each, and go with the arena
  // once the loop has handled them.
  v1::WorkerEvent* NewEvent() {
    google::protobuf::ArenaOptions options;
    options.start_block_size = 16 << 10;
    options.max_block_size = 1 << 20;
    event_.arena = std::make_shared<google::protobuf::Arena>(options);
    event_.message = google::protobuf::Arena::CreateMessage<v1::WorkerEvent>(event_.arena.get());
    return event_.message;
  }

  // True once: the read side's hold, if no read is in flight, is to be released.
  bool TakeReadHoldLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (reading_ || read_hold_released_) return false;
    read_hold_released_ = true;
    return true;
  }

  // Commands that queue behind the write in flight go out together, as one
  // WorkerCommand.batch of at most about kMaxBatchBytes, once the worker's
  // Ready said it takes batches (`*batches`): one write, one read and one
  // completion for a burst of requests instead of one each.
  static constexpr size_t kMaxBatchBytes = 256 << 10;
  static bool Batchable(const v1::WorkerCommand& command) {
    return command.has_add() || command.has_append_input() || command.has_utility() ||
           command.has_drain_ack();
  }
  static StreamWriter<v1::WorkerCommand>::Options WriterOptions(const std::atomic<bool>* batches) {
    StreamWriter<v1::WorkerCommand>::Options options;
    options.label = "session";
    options.max_write_bytes = kMaxBatchBytes;
    options.merge = [batches](v1::WorkerCommand& into, v1::WorkerCommand& next) {
      if (!batches->load(std::memory_order_relaxed) || !Batchable(next)) return false;
      if (!into.has_batch()) {
        if (!Batchable(into)) return false;
        v1::WorkerCommand first = std::move(into);
        *into.mutable_batch()->add_commands() = std::move(first);
      }
      *into.mutable_batch()->add_commands() = std::move(next);
      return true;
    };
    return options;
  }

  GrpcWorkerStub* const stub_;
  const EventCallback on_event_;
  const DoneCallback on_done_;
  grpc::ClientContext context_;
  // The event being read (touched by the read's reactions and by whoever
  // starts the next read, never both at once).
  struct ArenaEvent {
    std::shared_ptr<google::protobuf::Arena> arena;
    v1::WorkerEvent* message = nullptr;  // On `arena`.
  };
  ArenaEvent event_;
  std::shared_ptr<ConnectCall> self_;
  // The worker takes WorkerCommand.batch (set from its Ready).
  std::atomic<bool> batches_{false};
  StreamWriter<v1::WorkerCommand> writer_;

  // Outputs read but not yet handled by the loop: past this many, reading waits.
  static constexpr int kMaxUnhandledOutputs = 16384;
  // Events of at most this many outputs may be handled on the reading thread.
  static constexpr int kMaxInlineOutputs = 4;
  static int Weight(const v1::WorkerEvent& event) {
    return event.has_step() ? std::max(1, event.step().outputs_size()) : 1;
  }

  absl::Mutex mu_;
  int unhandled_ ABSL_GUARDED_BY(mu_) = 0;
  bool reading_ ABSL_GUARDED_BY(mu_) = false;  // A read is in flight.
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;  // Cancel() came: no more reads.
  bool read_hold_released_ ABSL_GUARDED_BY(mu_) = false;
};

GrpcWorkerStub::GrpcWorkerStub(const WorkerChannelOptions& options, Scheduler* loop) : loop_(loop) {
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
  args.SetMaxReceiveMessageSize(kMaxReceivedResponseBytes);
  if (!options.tls_name.empty()) args.SetSslTargetNameOverride(options.tls_name);
  channel_ = grpc::CreateCustomChannel(
      options.address,
      options.credentials != nullptr ? options.credentials : grpc::InsecureChannelCredentials(),
      args);
  stub_ = v1::StageWorker::NewStub(channel_);
}

GrpcWorkerStub::~GrpcWorkerStub() {
  Shutdown();
  // Every call's last callback ran, but gRPC may still be releasing a call
  // that holds the channel's completion queue (common/grpc/channel_release.h).
  stub_.reset();
  ReleaseChannelLater(std::move(channel_));
}

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
  stub_->async()->Abort(&call->context, &call->request, &call->response,
                        [this, call, key, done = std::move(done)](grpc::Status status) {
                          absl::StatusOr<v1::WorkerAbortResponse> result =
                              status.ok()
                                  ? absl::StatusOr<v1::WorkerAbortResponse>(call->response)
                                  : absl::StatusOr<v1::WorkerAbortResponse>(FromGrpcStatus(status));
                          Scheduler* const loop = loop_;
                          {
                            // First: a Shutdown() waits for this, and `done` may run here.
                            absl::MutexLock lock(&mu_);
                            calls_.erase(key);
                          }
                          // The thread that read the answer commits the abort if the loop is
                          // free (and answers the client): no wake-up of the loop's thread.
                          loop->RunOrPost([done, result = std::move(result)] { done(result); });
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
  auto idle = [this]()
                  ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return streams_.empty() && calls_.empty(); };
  mu_.Await(absl::Condition(&idle));
}

}  // namespace omnistage
