// WorkerTestClient: a blocking StageWorker client for tests. One Connect session;
// a reader thread collects events so tests can wait for them with a deadline.
//
//   WorkerTestClient client(channel);
//   ASSERT_OK_AND_ASSIGN(v1::Ready ready, client.Connect());
//   uint64_t seq = client.Add("r1", "hello", /*max_tokens=*/8);
//   std::vector<v1::RequestOutput> outs = client.CollectUntilFinished("r1", absl::Seconds(5));
#ifndef OMNISTAGE_STAGE_WORKER_TESTING_WORKER_TEST_CLIENT_H_
#define OMNISTAGE_STAGE_WORKER_TESTING_WORKER_TEST_CLIENT_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "protos/stage_worker.grpc.pb.h"

namespace omnistage {

class WorkerTestClient {
 public:
  explicit WorkerTestClient(std::shared_ptr<grpc::Channel> channel);
  // Cancels the stream if still open and joins the reader.
  ~WorkerTestClient();

  // Opens the session: Hello, then waits for Ready (or the stream's error).
  absl::StatusOr<v1::Ready> Connect(v1::Hello hello = v1::Hello());

  // Sends `command` with the next seq (unless it has one); returns the seq used.
  uint64_t Send(v1::WorkerCommand command);
  // Sends `commands` as one WorkerCommand.batch, numbered with the next seqs;
  // returns the last seq used.
  uint64_t SendBatch(std::vector<v1::WorkerCommand> commands);
  // Sends an AddRequest with one text payload; returns its seq.
  uint64_t Add(const std::string& id, const std::string& text, uint32_t max_tokens,
               bool input_complete = true);
  // Unary Abort on this session, fenced after the last command sent.
  absl::StatusOr<std::vector<std::string>> Abort(const std::vector<std::string>& ids);
  // Half-closes the stream (the session ends).
  void CloseWrites();
  // Cancels the call (like a crashed client).
  void Cancel();

  // The next event, or nullopt if none arrives within `timeout` or the stream ended.
  std::optional<v1::WorkerEvent> Next(absl::Duration timeout);
  // The first event `match` accepts within `timeout`, dropping the others
  // before it; nullopt if none came by then or the stream ended first.
  std::optional<v1::WorkerEvent> NextWhere(const std::function<bool(const v1::WorkerEvent&)>& match,
                                           absl::Duration timeout);
  // The events that arrive until the stream ends, or until `timeout` passes,
  // or (when given) until none arrived for `quiet`: whichever comes first.
  // Never longer than `timeout`, however fast events keep coming.
  std::vector<v1::WorkerEvent> EventsUntilEnd(absl::Duration timeout,
                                              absl::Duration quiet = absl::InfiniteDuration());
  // Reads events until `id` has finished; returns all its outputs in order (other
  // events are kept for later Next() calls). Empty if it does not finish in time.
  std::vector<v1::RequestOutput> CollectUntilFinished(const std::string& id,
                                                      absl::Duration timeout);
  // Waits for the stream to end and returns its status.
  std::optional<grpc::Status> WaitForEnd(absl::Duration timeout);

  const std::string& session_id() const { return session_id_; }
  uint64_t last_seq() const { return seq_; }
  v1::StageWorker::Stub& stub() { return *stub_; }

 private:
  void ReadLoop();

  std::unique_ptr<v1::StageWorker::Stub> stub_;
  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientReaderWriter<v1::WorkerCommand, v1::WorkerEvent>> stream_;
  std::thread reader_;
  uint64_t seq_ = 0;
  std::string session_id_;
  bool writes_closed_ = false;

  absl::Mutex mu_;
  std::deque<v1::WorkerEvent> events_ ABSL_GUARDED_BY(mu_);
  std::optional<grpc::Status> end_ ABSL_GUARDED_BY(mu_);
};

}  // namespace omnistage

#endif  // OMNISTAGE_STAGE_WORKER_TESTING_WORKER_TEST_CLIENT_H_
