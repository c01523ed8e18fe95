// ClientStream: the response side of one Generate call — the ResponseSink the
// core writes a request's outputs to, over the gRPC write reactor.
//
// One response is written at a time; output chunks that queue meanwhile travel
// together in the next response, up to about kMaxResponseBytes (clients' default
// receive limit is 4 MiB), so a slow client gets fewer, larger messages. The
// terminal goes with the last chunks, in the same step as the call's end (OK);
// Fail() ends a call that never started with its error. What the core sends
// during one task of its loop is written when that task returns (`defer`), so
// the chunks of a request's last output, its terminal and the call's end leave
// in one write (for a one-output request, the whole call). When the client goes
// away, the request is cancelled (through `cancel`, which must post to the
// core's loop).
//
// Thread-safe: the core calls the ResponseSink methods on its loop, the reactor
// calls OnWriteDone/OnCancel on gRPC threads.
#ifndef OMNISTAGE_ORCHESTRATOR_SERVICE_CLIENT_STREAM_H_
#define OMNISTAGE_ORCHESTRATOR_SERVICE_CLIENT_STREAM_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "common/stream_writer.h"
#include "orchestrator/core/response_sink.h"
#include "protos/orchestrator.pb.h"

namespace omnistage {

class ClientStream : public ResponseSink, public std::enable_shared_from_this<ClientStream> {
 public:
  static constexpr size_t kMaxResponseBytes = 1 << 20;
  using Transport = StreamWriter<v1::GenerateResponse>::Transport;
  // Asks the core to cancel `request_id` for `stream` (the stream is kept alive
  // until then by the shared_ptr).
  using CancelFn =
      std::function<void(std::shared_ptr<ClientStream> stream, const std::string& request_id)>;

  // `transport` (the reactor) must stay valid until it is finished.
  // `on_queued_bytes` hears the bytes waiting for the client grow and shrink
  // (StreamWriter::Options::on_queued_bytes). Past `max_queued_bytes` (0: no
  // bound) the client is too slow: the call is cancelled, and with it the
  // request on every stage.
  // Runs a closure once the loop's task running now returns (Scheduler::Defer).
  using DeferFn = std::function<void(std::function<void()>)>;

  // `transport` must implement BeginWriteAndFinish (gRPC's reactors do).
  // `defer`: by default what is sent is written at once.
  ClientStream(Transport* transport, CancelFn cancel,
               std::function<void(int64_t delta)> on_queued_bytes = [](int64_t) {},
               size_t max_queued_bytes = 0,
               DeferFn defer = [](std::function<void()> write) { write(); });

  // ResponseSink (the core's loop).
  void Started(const std::string& request_id) override;
  void Send(const std::string& request_id, std::vector<v1::OutputChunk> chunks) override;
  void Finish(const std::string& request_id, v1::Terminal terminal) override;
  void Fail(const absl::Status& status) override;

  // The id its request runs under, once Started (""
  // before, or when it failed).
  std::string request_id() const;

  // The reactor (gRPC threads).
  void OnWriteDone(bool ok) { writer_.OnWriteDone(ok); }
  void OnCancel();

 private:
  // Writes `response`; the first refusal (a too slow client) is logged.
  void Write(const std::string& request_id, v1::GenerateResponse response);
  // Writes what Send and Finish left in pending_ (the loop's).
  void Flush();
  // Flush() once the loop's task running now returns.
  void FlushLater();

  const CancelFn cancel_;
  const DeferFn defer_;
  // What Send and Finish gave during the loop's task running now, written
  // when it returns; touched only on the loop.
  std::vector<v1::GenerateResponse> pending_;
  size_t pending_back_bytes_ = 0;  // Of the chunks in pending_.back().
  std::optional<v1::Terminal> pending_terminal_;
  std::string pending_id_;
  bool flush_deferred_ = false;
  StreamWriter<v1::GenerateResponse> writer_;
  const size_t max_queued_bytes_;

  mutable absl::Mutex mu_;
  std::string request_id_ ABSL_GUARDED_BY(mu_);
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  bool ended_ ABSL_GUARDED_BY(mu_) = false;  // Finish or Fail came.
  bool refused_ ABSL_GUARDED_BY(mu_) = false;  // The writer took no more.
};

}  // namespace omnistage

#endif  // OMNISTAGE_ORCHESTRATOR_SERVICE_CLIENT_STREAM_H_
