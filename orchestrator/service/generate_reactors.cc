#include "orchestrator/service/generate_reactors.h"

#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/grpc/grpc_util.h"
#include "common/retry_hint.h"
#include "orchestrator/service/client_stream.h"

namespace omnistage {
namespace {

// The ClientStream of a call on `core`: a client that goes away cancels its
// request on the loop; the bytes waiting for it are measured and bounded.
std::shared_ptr<ClientStream> NewClientStream(ClientStream::Transport* transport,
                                              PipelineCore* core, EventLoop* loop) {
  return std::make_shared<ClientStream>(
      transport,
      [core, loop](std::shared_ptr<ClientStream> stream, const std::string& id) {
        loop->Post([core, stream, id] { core->Cancel(id, stream.get()); });
      },
      [metrics = &core->metrics()](int64_t delta) { metrics->QueuedBytes(delta); },
      core->config().max_client_queued_bytes,
      [loop](std::function<void()> write) { loop->Defer(std::move(write)); });
}

// A W3C traceparent in the call's metadata follows the request to every stage
// and onto every log line about it.
std::string MetadataOf(const grpc::CallbackServerContext& context, const char* key) {
  auto it = context.client_metadata().find(key);
  if (it == context.client_metadata().end()) return "";
  return std::string(it->second.data(), it->second.size());
}
std::string TraceparentOf(const grpc::CallbackServerContext& context) {
  return MetadataOf(context, "traceparent");
}
// Its W3C tracestate goes along with it.
std::string TracestateOf(const grpc::CallbackServerContext& context) {
  return MetadataOf(context, "tracestate");
}

// A refusal of the moment says when to come back (also in the status details,
// as google.rpc.RetryInfo).
grpc::Status FinalStatus(grpc::CallbackServerContext* context, const absl::Status& status) {
  if (std::optional<absl::Duration> after = RetryAfterOf(status)) {
    context->AddTrailingMetadata(kRetryAfterMsTrailer,
                                 absl::StrCat(absl::ToInt64Milliseconds(*after)));
  }
  return ToGrpcStatus(status);
}

class GenerateReactor final : public grpc::ServerWriteReactor<v1::GenerateResponse>,
                              public ClientStream::Transport {
 public:
  GenerateReactor(grpc::CallbackServerContext* context, PipelineCore* core, EventLoop* loop,
                  v1::GenerateRequest request, Caller caller)
      : context_(context), stream_(NewClientStream(this, core, loop)) {
    // At light load the request starts here, on the thread that read it.
    loop->RunOrPost([core, stream = stream_, request = std::move(request),
                     traceparent = TraceparentOf(*context), tracestate = TracestateOf(*context),
                     caller = std::move(caller)]() mutable {
      core->Generate(std::move(request), stream, std::move(traceparent), caller,
                     /*streamed_input=*/false, std::move(tracestate));
    });
  }

  // ClientStream::Transport.
  void BeginWrite(const v1::GenerateResponse* response) override { StartWrite(response); }
  void FinishStream(const absl::Status& status) override { Finish(FinalStatus(context_, status)); }
  void BeginWriteAndFinish(const v1::GenerateResponse* response,
                           const absl::Status& status) override {
    StartWriteAndFinish(response, grpc::WriteOptions(), FinalStatus(context_, status));
  }
  void CancelStream() override { context_->TryCancel(); }

  // Reactor.
  void OnWriteDone(bool ok) override { stream_->OnWriteDone(ok); }
  void OnCancel() override { stream_->OnCancel(); }
  void OnDone() override { delete this; }

 private:
  grpc::CallbackServerContext* const context_;
  const std::shared_ptr<ClientStream> stream_;
};

// GenerateDuplex. One read is outstanding at a time, from the start to the
// client's half-close (or the call's end): the first message starts the
// request, each later one is posted to the loop in order, so the core sees them
// after the request started. Reads go on after the request ended; the core
// drops what no request takes. What one request may stream is bounded by the
// limits the core checks, so reading ahead holds no unbounded memory.
class DuplexReactor final : public grpc::ServerBidiReactor<v1::GenerateInput, v1::GenerateResponse>,
                            public ClientStream::Transport {
 public:
  DuplexReactor(grpc::CallbackServerContext* context, PipelineCore* core, EventLoop* loop,
                Caller caller)
      : context_(context),
        core_(core),
        loop_(loop),
        caller_(std::move(caller)),
        stream_(NewClientStream(this, core, loop)) {
    StartRead(&in_);
  }

  // ClientStream::Transport.
  void BeginWrite(const v1::GenerateResponse* response) override { StartWrite(response); }
  void FinishStream(const absl::Status& status) override { Finish(FinalStatus(context_, status)); }
  void BeginWriteAndFinish(const v1::GenerateResponse* response,
                           const absl::Status& status) override {
    StartWriteAndFinish(response, grpc::WriteOptions(), FinalStatus(context_, status));
  }
  void CancelStream() override { context_->TryCancel(); }

  // Reactor. gRPC runs one OnReadDone at a time.
  void OnReadDone(bool ok) override {
    if (!ok) {
      EndOfInput();
      return;
    }
    if (!started_) {
      started_ = true;
      if (!in_.has_request()) {
        Finish(ToGrpcStatus(absl::InvalidArgumentError(
            "the first message of a GenerateDuplex call carries `request`")));
        return;
      }
      loop_->RunOrPost([core = core_, stream = stream_, request = std::move(*in_.mutable_request()),
                        traceparent = TraceparentOf(*context_),
                        tracestate = TracestateOf(*context_), caller = caller_]() mutable {
        core->Generate(std::move(request), stream, std::move(traceparent), caller,
                       /*streamed_input=*/true, std::move(tracestate));
      });
    } else {
      if (in_.has_input() && in_.input().last()) said_last_ = true;
      loop_->Post([core = core_, stream = stream_, message = std::move(in_)]() mutable {
        core->AppendInput(stream->request_id(), stream.get(), std::move(message));
      });
    }
    in_.Clear();
    StartRead(&in_);
  }
  void OnWriteDone(bool ok) override { stream_->OnWriteDone(ok); }
  void OnCancel() override { stream_->OnCancel(); }
  void OnDone() override { delete this; }

 private:
  // The client half-closed (or the call ended, when the core ignores this): its
  // input is complete.
  void EndOfInput() {
    if (!started_) {
      Finish(ToGrpcStatus(absl::InvalidArgumentError(
          "the GenerateDuplex call ended before its first message (its `request`)")));
      return;
    }
    if (said_last_) return;
    v1::GenerateInput last;
    last.mutable_input()->set_last(true);
    loop_->Post([core = core_, stream = stream_, last = std::move(last)]() mutable {
      core->AppendInput(stream->request_id(), stream.get(), std::move(last));
    });
  }

  grpc::CallbackServerContext* const context_;
  PipelineCore* const core_;
  EventLoop* const loop_;
  const Caller caller_;
  const std::shared_ptr<ClientStream> stream_;
  v1::GenerateInput in_;
  bool started_ = false;
  bool said_last_ = false;
};

class RefusedWrite final : public grpc::ServerWriteReactor<v1::GenerateResponse> {
 public:
  explicit RefusedWrite(const absl::Status& status) { Finish(ToGrpcStatus(status)); }
  void OnDone() override { delete this; }
};

class RefusedBidi final : public grpc::ServerBidiReactor<v1::GenerateInput, v1::GenerateResponse> {
 public:
  explicit RefusedBidi(const absl::Status& status) { Finish(ToGrpcStatus(status)); }
  void OnDone() override { delete this; }
};

}  // namespace

grpc::ServerWriteReactor<v1::GenerateResponse>* NewGenerateReactor(
    grpc::CallbackServerContext* context, PipelineCore* core, EventLoop* loop,
    const v1::GenerateRequest& request, Caller caller) {
  return new GenerateReactor(context, core, loop, request, std::move(caller));
}

grpc::ServerBidiReactor<v1::GenerateInput, v1::GenerateResponse>* NewDuplexReactor(
    grpc::CallbackServerContext* context, PipelineCore* core, EventLoop* loop, Caller caller) {
  return new DuplexReactor(context, core, loop, std::move(caller));
}

grpc::ServerWriteReactor<v1::GenerateResponse>* RefusedGenerate(const absl::Status& status) {
  return new RefusedWrite(status);
}

grpc::ServerBidiReactor<v1::GenerateInput, v1::GenerateResponse>* RefusedDuplex(
    const absl::Status& status) {
  return new RefusedBidi(status);
}

}  // namespace omnistage
