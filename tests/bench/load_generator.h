// The benchmark's one load generator: N concurrent Generate streams on one
// channel, driven by the gRPC callback client API (one reactor per stream, no
// thread per stream), recording what a client sees:
//
//   tokens     the sum of payload.tokens().ids_size() over every OutputChunk
//              (tokens in a terminal's partial_output are not counted);
//   TTFT       request start -> the first message carrying a token;
//   gaps       between consecutive token arrivals. A message carrying k tokens
//              gives one gap (since the previous message) and k-1 gaps of 0:
//              every token is attributed to the arrival of its message;
//   one-way    for each production stamp (common/production_stamp.h) a message
//              carries: its arrival minus the stamp, i.e. producer emit ->
//              client receive on this machine's CLOCK_MONOTONIC.
//
// It drives every row of the benchmark (the baseline server, nginx in front of
// it, the orchestrator), since they all serve omnistage.v1.Orchestrator.
//
//   LoadOptions options;
//   options.streams = 64;
//   options.run_for = absl::Seconds(2);   // each slot runs requests back to back
//   options.make_request = [](int slot, int64_t seq) { return ...; };
//   StreamGroup group(stub, options);
//   group.Start();
//   if (!group.WaitDone(absl::Seconds(60))) group.CancelAll();
//   LoadResult result = group.Result();
//
// Thread-safety: every method may be called from any thread. The destructor
// cancels what is still running and waits (bounded) for it to end; a stream
// that never ends after cancellation is a broken invariant and exits the
// process (the child processes die with it).
#ifndef OMNISTAGE_TESTS_BENCH_LOAD_GENERATOR_H_
#define OMNISTAGE_TESTS_BENCH_LOAD_GENERATOR_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "protos/orchestrator.grpc.pb.h"

namespace omnistage {
namespace bench {

// Monotonic clock in nanoseconds (CLOCK_MONOTONIC, shared by all processes).
int64_t NowNs();

// A channel of its own (no shared subchannel) to 127.0.0.1:port, connected or
// nullptr after `timeout`.
std::shared_ptr<grpc::Channel> ConnectLoopback(int port, absl::Duration timeout);

// The request for one stream: `slot` in [0, streams), `seq` unique in the group.
using RequestFactory = std::function<v1::GenerateRequest(int slot, int64_t seq)>;

struct LoadOptions {
  // Concurrent streams (slots).
  int streams = 1;
  // Zero: one request per slot. Otherwise a slot starts its next request when
  // the previous one ends, until this long after Start().
  absl::Duration run_for = absl::ZeroDuration();
  RequestFactory make_request;
};

// What one stream has seen so far (a copy; the stream may still be running).
struct StreamView {
  std::string request_id;  // As sent (may be empty: the server assigns one).
  int64_t start_ns = 0;
  int64_t first_token_ns = 0;  // 0: no token yet.
  int64_t terminal_ns = 0;     // 0: no terminal yet.
  int64_t tokens = 0;
  v1::FinishReason finish_reason = v1::FINISH_REASON_UNSPECIFIED;
  int error_replica = -1;  // terminal.error.replica, when the terminal is ERROR.
  bool done = false;       // The call has ended (OnDone ran).
};

// Totals over every stream that ended.
struct LoadResult {
  int64_t requests = 0;  // Streams that ended.
  int64_t failed = 0;    // Of those: non-OK status, or a terminal other than STOP/LENGTH.
  int64_t tokens = 0;
  int64_t messages = 0;  // Responses that carried at least one token.
  double seconds = 0;    // First stream start -> last stream end.
  std::vector<double> ttft_us;
  std::vector<double> gap_us;
  std::vector<double> one_way_us;
  std::string first_error;  // Of the first failed stream, if any.

  double tokens_per_second() const { return seconds > 0 ? tokens / seconds : 0; }
};

// The p-th percentile (0..100, nearest rank) of `values`; 0 when empty.
double Percentile(std::vector<double> values, double p);
// Each of `values` (one per run) with `decimals` digits, then "(min..max)";
// "-" when empty.
std::string Spread(const std::vector<double>& values, int decimals);

class StreamGroup {
 public:
  StreamGroup(std::shared_ptr<v1::Orchestrator::Stub> stub, LoadOptions options);
  ~StreamGroup();
  StreamGroup(const StreamGroup&) = delete;
  StreamGroup& operator=(const StreamGroup&) = delete;

  // Starts one request on every slot.
  void Start();
  // Waits until every stream has ended and no slot will start another.
  bool WaitDone(absl::Duration timeout);
  // Waits until every stream started so far has a token or has ended.
  bool WaitAllHaveTokens(absl::Duration timeout);
  // Waits until stream `index` (in start order) has its terminal or has ended.
  bool WaitTerminal(size_t index, absl::Duration timeout);
  // Waits until `predicate` holds over the views (re-checked on every terminal).
  bool WaitUntil(const std::function<bool(const std::vector<StreamView>&)>& predicate,
                 absl::Duration timeout);
  // Cancels every running stream and starts no more.
  void CancelAll();

  // Views of every stream started so far, in start order.
  std::vector<StreamView> Views() const;
  // Totals over the streams that have ended.
  LoadResult Result() const;

 private:
  class Stream;

  // Starts a stream for `slot` (not under mu_: starting a call may run
  // reactions). `reserved`: running_ already counts it.
  void Launch(int slot, bool reserved);
  // Stream callbacks.
  void OnProgress();
  void OnStreamDone(Stream* stream);

  const std::shared_ptr<v1::Orchestrator::Stub> stub_;
  const LoadOptions options_;

  mutable absl::Mutex mu_;
  // Every stream started, in start order; they live until the group goes away.
  std::vector<std::unique_ptr<Stream>> streams_ ABSL_GUARDED_BY(mu_);
  int64_t next_seq_ ABSL_GUARDED_BY(mu_) = 0;
  int running_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int64_t started_ns_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t last_end_ns_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t progress_ ABSL_GUARDED_BY(mu_) = 0;  // Bumped on every token/terminal/end event.
  LoadResult result_ ABSL_GUARDED_BY(mu_);
};

}  // namespace bench
}  // namespace omnistage

#endif  // OMNISTAGE_TESTS_BENCH_LOAD_GENERATOR_H_
