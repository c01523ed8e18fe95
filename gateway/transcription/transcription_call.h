// TranscriptionCall: one /v1/audio/transcriptions request in flight — the
// listening pipeline's GenerateDuplex (gRPC callback API): the request, then
// the upload's audio (16-bit mono, already at the recogniser's rate) in
// chunks of kChunkSeconds, the last marked `last`; while the pipeline's first
// stage says what it heard, utterance by utterance, into a Transcript.
//
// Without `stream` the answer is the whole transcript in the format asked,
// once the pipeline finished. With it, each utterance leaves as a
// transcript.text.delta event as soon as it is heard (the next response is
// read once the client's socket took it), then transcript.text.done. An error
// before anything was sent is its own status in OpenAI's shape; after a
// stream began it is an error event, and the stream ends. A client that goes
// away cancels the call, which aborts the request on every stage. No
// fallback: audio may already have gone to the first try.
#ifndef OMNISTAGE_GATEWAY_TRANSCRIPTION_TRANSCRIPTION_CALL_H_
#define OMNISTAGE_GATEWAY_TRANSCRIPTION_TRANSCRIPTION_CALL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gateway/chat/chat_call.h"
#include "gateway/chat/response_reader.h"
#include "gateway/http/api_error.h"
#include "gateway/http/http_server.h"
#include "gateway/http/trace_headers.h"
#include "gateway/transcription/transcript.h"
#include "gateway/transcription/transcription_request.h"
#include "grpcpp/grpcpp.h"
#include "protos/orchestrator.grpc.pb.h"

namespace omnistage {

// What the listening pipeline is sent of one upload.
struct TranscriptionAudio {
  std::vector<int16_t> samples;  // mono
  int sample_rate_hz = 0;
};

class TranscriptionCall final
    : public ResponseReader<grpc::ClientBidiReactor<v1::GenerateInput, v1::GenerateResponse>> {
 public:
  // Audio per input chunk: well under the orchestrator's 1 MiB per message.
  static constexpr int kChunkSeconds = 5;

  // Starts the call; it deletes itself once it ended. Loop thread.
  static void Start(v1::Orchestrator::Stub* stub, bool orchestrator_tls,
                    TranscriptionRequest request, TranscriptionAudio audio,
                    std::string authorization, TraceHeaders trace,
                    std::shared_ptr<HttpExchange> exchange, LoopPoster post, CallObserver observer);

  // Reactor (gRPC threads).
  void OnWriteDone(bool ok) override;
  void OnWritesDoneDone(bool ok) override;

 private:
  TranscriptionCall(TranscriptionRequest request, TranscriptionAudio audio, TraceHeaders trace,
                    std::shared_ptr<HttpExchange> exchange, LoopPoster post, CallObserver observer);
  // The next input message into writing_; false when the audio was all sent.
  bool NextChunk();
  // ResponseReader (loop thread).
  void Deliver(const v1::GenerateResponse& response) override;
  void Ended(const grpc::Status& status) override;
  void Retry(v1::Orchestrator::Stub*) override {}

  // The whole transcript in the format asked, and its Content-Type.
  std::string Body() const;
  const char* ContentType() const;
  void AnswerError(const ApiError& error, const char* outcome);
  // Ends a stream that began with an error event.
  void Break(const std::string& why);
  void Finish(int http_status, std::string outcome, std::string error = "");

  const TranscriptionRequest request_;
  const TranscriptionAudio audio_;
  const TraceHeaders trace_;
  bool orchestrator_tls_ = false;
  bool got_response_ = false;
  std::string request_id_;
  const std::shared_ptr<HttpExchange> exchange_;
  const CallObserver observer_;
  Transcript transcript_;
  v1::Terminal terminal_;
  bool got_terminal_ = false;
  // Streamed: what the terminal's response added, sent with the end.
  std::string terminal_delta_;
  // gRPC threads, one write at a time: the message being written, and the
  // next sample to send.
  v1::GenerateInput writing_;
  size_t next_sample_ = 0;
  bool sent_last_ = false;
};

}  // namespace omnistage

#endif  // OMNISTAGE_GATEWAY_TRANSCRIPTION_TRANSCRIPTION_CALL_H_
