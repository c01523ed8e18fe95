// FakeResponseSink: a ResponseSink that records what one Generate call received,
// for orchestrator unit tests.
//
//   auto sink = std::make_shared<FakeResponseSink>();
//   core.Generate(request, sink);
//   core.OnStepOutputs(...);
//   EXPECT_EQ(sink->Text("r1"), "Hello");        // streamed text, all stages
//   EXPECT_EQ(sink->terminal_count(), 1);
//   EXPECT_EQ(sink->terminal().finish_reason(), v1::FINISH_REASON_STOP);
//
// Accessors return copies. Thread-safe, as the ResponseSink contract asks.
#ifndef OMNISTAGE_ORCHESTRATOR_CORE_TESTING_FAKE_RESPONSE_SINK_H_
#define OMNISTAGE_ORCHESTRATOR_CORE_TESTING_FAKE_RESPONSE_SINK_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "orchestrator/core/response_sink.h"
#include "protos/orchestrator.pb.h"

namespace omnistage {

class FakeResponseSink : public ResponseSink {
 public:
  void Started(const std::string& request_id) override;
  void Send(const std::string& request_id, std::vector<v1::OutputChunk> chunks) override;
  void Finish(const std::string& request_id, v1::Terminal terminal) override;
  void Fail(const absl::Status& status) override;

  // The ids Started named, in order.
  std::vector<std::string> started() const;
  // Every chunk sent for `request_id`, in order.
  std::vector<v1::OutputChunk> chunks(const std::string& request_id) const;
  // The concatenated text payloads sent for `request_id`.
  std::string Text(const std::string& request_id) const;
  int send_calls() const;
  // Send calls that came after a terminal or a Fail (a broken invariant).
  int sends_after_end() const;

  // (request_id, terminal) of every Finish, in order.
  std::vector<std::pair<std::string, v1::Terminal>> terminals() const;
  int terminal_count() const;
  // The first terminal (a default Terminal if none came).
  v1::Terminal terminal() const;
  // The request id the first terminal named ("" if none came).
  std::string terminal_id() const;

  std::vector<absl::Status> fails() const;
  int fail_count() const;
  // The first Fail status (OK if none came).
  absl::Status fail_status() const;

  // Finish and Fail calls together: 1 for a call that ended properly.
  int end_count() const;

 private:
  mutable absl::Mutex mu_;
  std::vector<std::string> started_ ABSL_GUARDED_BY(mu_);
  std::vector<std::pair<std::string, v1::OutputChunk>> chunks_ ABSL_GUARDED_BY(mu_);
  int send_calls_ ABSL_GUARDED_BY(mu_) = 0;
  int sends_after_end_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::pair<std::string, v1::Terminal>> terminals_ ABSL_GUARDED_BY(mu_);
  std::vector<absl::Status> fails_ ABSL_GUARDED_BY(mu_);
};

}  // namespace omnistage

#endif  // OMNISTAGE_ORCHESTRATOR_CORE_TESTING_FAKE_RESPONSE_SINK_H_
