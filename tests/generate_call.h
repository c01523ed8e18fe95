// What the process tests' clients see of a Generate (or GenerateDuplex) call:
// GenerateResult, everything one stream delivered, and GenerateCall, one call
// on its own thread that a test can watch, feed, cancel or wait for; with
// the requests they send (MakeRequest, StageParams) and Eventually().
#ifndef OMNISTAGE_TESTS_GENERATE_CALL_H_
#define OMNISTAGE_TESTS_GENERATE_CALL_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "protos/orchestrator.grpc.pb.h"

namespace omnistage {

// The deadline `timeout` from now, for a ClientContext.
std::chrono::system_clock::time_point DeadlineIn(absl::Duration timeout);

// Everything one Generate stream delivered.
struct GenerateResult {
  std::string request_id;
  std::string text;             // TEXT payloads, concatenated
  std::map<int, std::string> stage_text;  // the same, per stage
  std::string audio;            // AUDIO pcm_s16le, concatenated
  std::vector<int32_t> tokens;  // TOKENS ids, concatenated
  std::vector<int64_t> stamps;  // production stamps (engines with stamp_outputs), in order
  int responses = 0;            // messages read
  int output_chunks = 0;        // OutputChunks over all messages
  int responses_with_outputs_before_terminal = 0;
  int first_text_response = 0;       // 1-based index of the first message with text; 0: none
  int first_audio_response = 0;      // likewise for audio
  int terminal_response = 0;         // 1-based index of the first message with `terminal`
  int terminals = 0;                 // messages carrying `terminal` (exactly 1 expected)
  int responses_after_terminal = 0;  // must stay 0
  v1::Terminal terminal;             // the first terminal seen
  grpc::Status status;               // the call's final status (valid once done)
  bool done = false;

  // "text=<n bytes> audio=<n> tokens=<n> responses=<n> terminals=<n> reason=... error=..."
  std::string Summary() const;
  // The text stage `stage` sent ("" when none).
  std::string StageText(int stage) const {
    auto it = stage_text.find(stage);
    return it == stage_text.end() ? "" : it->second;
  }
};

// One Generate call running on its own thread, so a test can watch its progress,
// cancel it, or run many at once. The destructor cancels it if still running.
class GenerateCall {
 public:
  // `token`: sent as "authorization: Bearer <token>" when not empty.
  GenerateCall(std::shared_ptr<v1::Orchestrator::Stub> stub, v1::GenerateRequest request,
               absl::Duration deadline, const std::string& token = "");
  ~GenerateCall();
  // A GenerateDuplex call: `request` is its first message, and Send() and
  // CloseInput() feed its input.
  struct DuplexTag {};
  GenerateCall(std::shared_ptr<v1::Orchestrator::Stub> stub, v1::GenerateRequest request,
               absl::Duration deadline, const std::string& token, DuplexTag);
  GenerateCall(const GenerateCall&) = delete;
  GenerateCall& operator=(const GenerateCall&) = delete;

  // Waits until `predicate(progress)` holds; false if the call ended (or
  // `timeout` passed) first without it holding.
  bool WaitUntil(const std::function<bool(const GenerateResult&)>& predicate,
                 absl::Duration timeout);
  // Waits for the first OutputChunk.
  bool WaitForOutput(absl::Duration timeout);
  // Cancels the call from the client side (a disconnect).
  void Cancel();
  // Waits for the stream to end; on timeout it cancels the call first.
  GenerateResult Wait(absl::Duration timeout);
  GenerateResult Snapshot();

  // GenerateDuplex only: one input message (false once the call takes no
  // more), and the half-close that completes the input.
  bool Send(std::vector<v1::Payload> payloads, bool last = false);
  bool Send(const v1::GenerateInput& message);
  bool CloseInput();

 private:
  void Run(v1::GenerateRequest request);
  template <typename Stream>
  void Read(Stream& reader);

  const std::shared_ptr<v1::Orchestrator::Stub> stub_;
  grpc::ClientContext context_;
  absl::Mutex mu_;
  GenerateResult result_ ABSL_GUARDED_BY(mu_);
  absl::CondVar changed_;  // Signalled whenever result_ changes.
  // GenerateDuplex: the stream; its writes and its Finish never overlap.
  std::unique_ptr<grpc::ClientReaderWriter<v1::GenerateInput, v1::GenerateResponse>> duplex_;
  absl::Mutex write_mu_;
  bool finished_ ABSL_GUARDED_BY(write_mu_) = false;
  std::thread thread_;     // Last: starts after everything above exists.
};

// A request with `id` and `prompt` and optional per-stage overrides.
v1::GenerateRequest MakeRequest(const std::string& id, const std::string& prompt,
                                std::vector<v1::StageParameters> stage_params = {});
// StageParameters for `stage` with max_tokens and, optionally, extra params.
v1::StageParameters StageParams(int stage, uint32_t max_tokens,
                                std::vector<std::pair<std::string, std::string>> extra = {});

// Polls `condition` every `poll` until it holds or `timeout` passes.
bool Eventually(const std::function<bool()>& condition, absl::Duration timeout,
                absl::Duration poll = absl::Milliseconds(20));

}  // namespace omnistage

#endif  // OMNISTAGE_TESTS_GENERATE_CALL_H_
