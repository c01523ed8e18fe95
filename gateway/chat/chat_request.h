// ChatRequest: an OpenAI chat-completions request body (POST
// /v1/chat/completions) read into the Generate request the orchestrator runs.
// docs/openai.md lists the mapping field by field; in short:
//   messages        the prompt: a lone user message's text as it is, else one
//                   "<role>: <text>" line per message; input_audio parts (wav or
//                   mp3, base64) make it streamed input instead: the text and
//                   the audio in order (ChatRequest::input)
//   modalities      output_modalities: "text" -> TEXT, "audio" -> AUDIO
//                   (default ["text"])
//   audio.format    how audio is returned: wav (default) or pcm16
//   audio.voice     the voice stage's extra parameter `voice` (VoiceVariant())
//   max_tokens, max_completion_tokens, temperature, seed
//                   the text stage's parameters
//   stream, stream_options.include_usage
//   user            the session key (up to 256 bytes), unless the header
//                   X-Session-Id gives one
// Unknown fields are ignored, as OpenAI does; a known field of the wrong type or
// range is refused with an OpenAI-shaped error naming it.
//
//   absl::variant<ChatRequest, ApiError> parsed =
//       ParseChatRequest(body, model, exchange->Header(kSessionIdHeader));
#ifndef OMNISTAGE_GATEWAY_CHAT_CHAT_REQUEST_H_
#define OMNISTAGE_GATEWAY_CHAT_CHAT_REQUEST_H_

#include <string>
#include <variant>
#include <vector>

#include "gateway/http/api_error.h"
#include "nlohmann/json.hpp"
#include "protos/orchestrator.pb.h"

namespace omnistage {

// What the gateway serves.
struct ServedModel {
  // The model id clients name (`model`), e.g. the pipeline's name.
  std::string id;
  // The pipeline's stage that writes the text: max_tokens, temperature and
  // seed are its parameters.
  int text_stage = 0;
  // The stage that speaks (the vocoder): audio.voice goes there as its extra
  // parameter `voice` (VoiceVariant()); -1: audio.voice is not used.
  int voice_stage = -1;
};

// The espeak-ng variant that speaks for an OpenAI voice name (alloy -> f2,
// onyx -> m7, ...: docs/openai.md); any other name is passed on as it is (a
// variant the vocoder knows, e.g. croak, or one it refuses).
std::string VoiceVariant(const std::string& voice);

// OpenAI's words for a JSON value's type in its errors ("a string", "an
// integer", ...): chat completions' and the Realtime API's alike.
std::string JsonTypeName(const nlohmann::json& value);
// OpenAI's errors for a known field of the wrong type ("Invalid type for 'x':
// expected a string, but got an integer instead.") and for one out of range
// ("Invalid 'x': <what>."), as every JSON route of the gateway answers them.
ApiError WrongTypeError(const std::string& param, const std::string& expected,
                        const nlohmann::json& got);
ApiError OutOfRangeError(const std::string& param, const std::string& what);

// The header that names a request's session (GenerateRequest.session_key):
// requests with the same key prefer the replicas that served it before.
inline constexpr char kSessionIdHeader[] = "X-Session-Id";

enum class AudioFormat { kWav, kPcm16 };

// The most audio a chat completion's input_audio parts may hold, in all.
inline constexpr double kMaxChatAudioSeconds = 300;

struct ChatRequest {
  v1::GenerateRequest generate;
  // A prompt that holds audio (input_audio parts): its pieces in order, text
  // and 16-bit mono audio (a second at most per payload, at the file's rate),
  // for a pipeline whose stage 0 hears (GenerateDuplex); generate.prompt is
  // then empty. Empty for a prompt of text alone.
  std::vector<v1::Payload> input;
  bool stream = false;
  bool include_usage = false;
  bool text = true;
  bool audio = false;
  AudioFormat audio_format = AudioFormat::kWav;
  // The request's `user`, for logs.
  std::string user;
  // The stage `audio.voice` went to as its extra parameter `voice`; -1 when
  // it went nowhere. A refusal of that parameter there names `audio.voice`.
  int voice_stage = -1;
  // audio.voice is none of OpenAI's names, passed on as it is: only the voice
  // stage can tell whether it knows it.
  bool voice_unvouched = false;
  // The stage whose text is the answer (ServedModel::text_stage): the text
  // other stages show (a listener's caption of the question) is not.
  int text_stage = 0;
};

// The request, or the error to answer with (400, or 404 for another model).
// `session_id`: the request's X-Session-Id header ("" when absent), which
// wins over `user` as its session key; 400 naming the header when it is longer
// than 256 bytes or holds a byte that is not printable ASCII.
std::variant<ChatRequest, ApiError> ParseChatRequest(const std::string& body,
                                                     const ServedModel& model,
                                                     const std::string& session_id = "");

}  // namespace omnistage

#endif  // OMNISTAGE_GATEWAY_CHAT_CHAT_REQUEST_H_
