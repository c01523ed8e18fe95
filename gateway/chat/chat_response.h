// ChatEncoder: what the pipeline streams (GenerateResponse messages and their
// terminal) as OpenAI chat-completion output — server-sent events of
// "chat.completion.chunk" objects ending with "data: [DONE]", or one
// "chat.completion" object when the request did not stream.
//
//   text  -> choices[0].delta.content (streaming) / message.content
//   audio -> choices[0].delta.audio.data (base64; with audio.format wav the
//            first chunk starts with a WAV header of unknown length) /
//            message.audio.data (base64 of a whole WAV file, or raw pcm16)
//   STOP -> finish_reason "stop", LENGTH -> "length"; an ERROR or ABORT after the
//   stream began -> an {"error": {...}} event, then [DONE].
// Usage: prompt_tokens and completion_tokens count the words of the prompt and
// of the text produced (the engines report no token counts).
//
// One per request; not thread-safe.
#ifndef OMNISTAGE_GATEWAY_CHAT_CHAT_RESPONSE_H_
#define OMNISTAGE_GATEWAY_CHAT_CHAT_RESPONSE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <variant>

#include "gateway/chat/chat_request.h"
#include "gateway/http/api_error.h"
#include "protos/orchestrator.pb.h"

namespace omnistage {

// The words of `text`: what the gateway counts as tokens (the engines report
// none), in chat completions' usage and Realtime responses' alike.
int64_t WordCount(const std::string& text);

// The error a terminal that did not finish well (ERROR or ABORT) stands for,
// as every route answers it: an abort with the code `aborted`, a pipeline's
// error its status (its `param` is for the caller to name: the worker names
// the field of its own request, e.g. params.extra.voice).
ApiError TerminalApiError(const v1::Terminal& terminal);

class ChatEncoder {
 public:
  // `created`: Unix seconds.
  ChatEncoder(const ChatRequest& request, std::string model, int64_t created);
  // The completion's id becomes "chatcmpl-<request id>" (the orchestrator's id).
  void set_request_id(const std::string& request_id) {
    id_ = "chatcmpl-" + request_id;
    prefix_.clear();
  }

  // Streaming: the events for `response`'s outputs ("" when it has none the
  // client asked for).
  std::string Events(const v1::GenerateResponse& response);
  // Streaming: the last events (the finish chunk or an error event, the usage
  // chunk if asked for, [DONE]).
  std::string FinalEvents(const v1::Terminal& terminal);

  // Not streaming: gathers `response`'s outputs.
  void Gather(const v1::GenerateResponse& response);
  // Not streaming: the chat.completion body, or the error to answer with.
  std::variant<std::string, ApiError> Completion(const v1::Terminal& terminal) const;
  // The error a terminal that did not finish well (ERROR or ABORT) stands
  // for; its `param` is the request's field the pipeline refused, when the
  // gateway put it there (audio.voice).
  ApiError TerminalError(const v1::Terminal& terminal) const;

 private:
  // One "data: {chunk}\n\n" event whose delta holds `delta_fields` (JSON
  // members, "" for none).
  std::string ChunkEvent(const std::string& delta_fields, const char* finish_reason);
  std::string UsageJson() const;

  const bool text_;
  const bool audio_;
  const AudioFormat audio_format_;
  const bool include_usage_;
  const int voice_stage_;
  const int text_stage_;
  const std::string model_;
  std::string id_ = "chatcmpl-unknown";
  const int64_t created_;
  const int64_t prompt_tokens_;
  int64_t completion_tokens_ = 0;
  // Every chunk event's text up to its delta's members.
  std::string prefix_;
  bool role_sent_ = false;
  bool wav_header_sent_ = false;
  // Not streaming: what came.
  std::string text_so_far_;
  std::string pcm_;
  int sample_rate_hz_ = 0;
  int channels_ = 1;
};

}  // namespace omnistage

#endif  // OMNISTAGE_GATEWAY_CHAT_CHAT_RESPONSE_H_
