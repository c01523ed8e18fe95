#include "gateway/chat/chat_request.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/types/span.h"
#include "common/limits.h"
#include "common/pcm16.h"
#include "gateway/audio/audio_decoder.h"
#include "gateway/http/json_body.h"
#include "nlohmann/json.hpp"

namespace omnistage {
namespace {

using nlohmann::json;

// The prompt's pieces in order: text (consecutive text merged) and the audio
// of input_audio parts, a second at most per payload.
class PromptPieces {
 public:
  void AddText(const std::string& text) {
    if (text.empty()) return;
    if (pieces_.empty() || !pieces_.back().has_text()) pieces_.emplace_back().mutable_text();
    pieces_.back().mutable_text()->mutable_text()->append(text);
  }
  void AddAudio(const DecodedAudio& audio) {
    const size_t second = static_cast<size_t>(audio.sample_rate_hz);
    for (size_t at = 0; at < audio.mono.size(); at += second) {
      v1::AudioChunk* chunk = pieces_.emplace_back().mutable_audio();
      AppendPcmS16le(absl::MakeConstSpan(audio.mono).subspan(at, second),
                     chunk->mutable_pcm_s16le());
      chunk->set_sample_rate_hz(audio.sample_rate_hz);
      chunk->set_channels(1);
    }
    audio_seconds_ += audio.seconds();
    has_audio_ = true;
  }
  bool has_audio() const { return has_audio_; }
  double audio_seconds() const { return audio_seconds_; }
  std::vector<v1::Payload>& pieces() { return pieces_; }

 private:
  std::vector<v1::Payload> pieces_;
  double audio_seconds_ = 0;
  bool has_audio_ = false;
};

// An input_audio part's audio into `out`.
std::optional<ApiError> ReadInputAudio(const json& part, const std::string& path,
                                       PromptPieces* out) {
  auto audio = part.find("input_audio");
  if (audio == part.end() || !audio->is_object()) {
    return WrongTypeError(path + ".input_audio", "an object",
                          audio == part.end() ? json(nullptr) : *audio);
  }
  auto format = audio->find("format");
  if (format == audio->end() || !format->is_string() || (*format != "wav" && *format != "mp3")) {
    return InvalidRequest(path + ".input_audio.format",
                          "Invalid 'input_audio.format': expected 'wav' or 'mp3'.",
                          "invalid_value");
  }
  auto data = audio->find("data");
  if (data == audio->end() || !data->is_string()) {
    return WrongTypeError(path + ".input_audio.data", "a base64 string",
                          data == audio->end() ? json(nullptr) : *data);
  }
  std::string bytes;
  if (!absl::Base64Unescape(data->get<std::string>(), &bytes)) {
    return InvalidRequest(path + ".input_audio.data", "Invalid 'input_audio.data': not base64.",
                          "invalid_value");
  }
  // The bytes must be what `format` says: the decoder reads many formats, and
  // a chat completion takes these two.
  const bool wav = bytes.size() >= 12 &&
                   (bytes.compare(0, 4, "RIFF") == 0 || bytes.compare(0, 4, "RIFX") == 0) &&
                   bytes.compare(8, 4, "WAVE") == 0;
  const bool mp3 = bytes.size() >= 3 && (bytes.compare(0, 3, "ID3") == 0 ||
                                         (static_cast<unsigned char>(bytes[0]) == 0xff &&
                                          (static_cast<unsigned char>(bytes[1]) & 0xe0) == 0xe0));
  if (*format == "wav" ? !wav : !mp3) {
    return InvalidRequest(path + ".input_audio.data",
                          absl::StrCat("Invalid 'input_audio.data': not audio of the format "
                                       "'input_audio.format' names (",
                                       format->get<std::string>(), ")."),
                          "invalid_value");
  }
  absl::StatusOr<DecodedAudio> decoded =
      DecodeAudioFile(bytes, kMaxChatAudioSeconds - out->audio_seconds());
  if (!decoded.ok()) {
    return InvalidRequest(
        path + ".input_audio.data",
        absl::StrCat("Invalid 'input_audio.data': ", decoded.status().message(),
                     " (a request holds at most ", kMaxChatAudioSeconds, " s of audio in all)."),
        "invalid_value");
  }
  out->AddAudio(*decoded);
  return std::nullopt;
}

// One message's content into `out`: a string, or an array of text and
// input_audio parts.
std::optional<ApiError> ReadContent(const json& content, const std::string& path,
                                    PromptPieces* out) {
  if (content.is_string()) {
    out->AddText(content.get<std::string>());
    return std::nullopt;
  }
  if (!content.is_array()) return WrongTypeError(path, "a string or an array of parts", content);
  for (size_t i = 0; i < content.size(); ++i) {
    const std::string part_path = absl::StrCat(path, "[", i, "]");
    const json& part = content[i];
    if (!part.is_object()) return WrongTypeError(part_path, "an object", part);
    auto type = part.find("type");
    if (type == part.end() || !type->is_string()) {
      return InvalidRequest(part_path + ".type",
                            absl::StrCat("Missing required parameter: '", part_path, ".type'."));
    }
    if (*type == "input_audio") {
      if (std::optional<ApiError> error = ReadInputAudio(part, part_path, out)) return error;
      continue;
    }
    if (*type != "text") {
      return InvalidRequest(part_path + ".type",
                            absl::StrCat("Content parts of type '", type->get<std::string>(),
                                         "' are not supported by this pipeline; only text and "
                                         "input_audio are."),
                            "unsupported_value");
    }
    auto part_text = part.find("text");
    if (part_text == part.end() || !part_text->is_string()) {
      return WrongTypeError(part_path + ".text", "a string",
                            part_text == part.end() ? json(nullptr) : *part_text);
    }
    out->AddText(part_text->get<std::string>());
  }
  return std::nullopt;
}

// The prompt the messages make (see the header) into `out`.
std::optional<ApiError> Prompt(const json& messages, PromptPieces* out) {
  if (!messages.is_array()) return WrongTypeError("messages", "an array", messages);
  if (messages.empty()) {
    return InvalidRequest("messages",
                          "Invalid 'messages': empty array. Expected an array with "
                          "minimum length 1, but got an empty array instead.",
                          "empty_array");
  }
  // A lone user message is the prompt as it is; else a line per message.
  const bool lone = messages.size() == 1 && messages[0].is_object() &&
                    messages[0].value("role", json()).is_string() && messages[0]["role"] == "user";
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string path = absl::StrCat("messages[", i, "]");
    const json& message = messages[i];
    if (!message.is_object()) return WrongTypeError(path, "an object", message);
    auto role = message.find("role");
    if (role == message.end()) {
      return InvalidRequest(path + ".role",
                            absl::StrCat("Missing required parameter: '", path, ".role'."));
    }
    if (!role->is_string()) return WrongTypeError(path + ".role", "a string", *role);
    const std::string name = role->get<std::string>();
    if (name != "system" && name != "developer" && name != "user" && name != "assistant" &&
        name != "tool") {
      return InvalidRequest(path + ".role",
                            absl::StrCat("Invalid value: '", name,
                                         "'. Supported values are: "
                                         "'system', 'developer', 'user', 'assistant' and 'tool'."),
                            "invalid_value");
    }
    if (!lone) out->AddText(absl::StrCat(i == 0 ? "" : "\n", name, ": "));
    auto content = message.find("content");
    if (content != message.end() && !content->is_null()) {
      if (std::optional<ApiError> error = ReadContent(*content, path + ".content", out)) {
        return error;
      }
    } else if (name != "assistant") {
      return InvalidRequest(path + ".content",
                            absl::StrCat("Missing required parameter: '", path, ".content'."));
    }
  }
  return std::nullopt;
}

// Reads an optional integer field in [min, max]; false and `*error` when wrong.
bool ReadInt(const json& body, const std::string& key, int64_t min, int64_t max,
             std::optional<int64_t>* out, ApiError* error) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return true;
  if (!it->is_number_integer()) {
    *error = WrongTypeError(key, "an integer", *it);
    return false;
  }
  const int64_t value =
      it->is_number_unsigned() && it->get<uint64_t>() > INT64_MAX ? INT64_MAX : it->get<int64_t>();
  if (value < min || value > max) {
    *error = OutOfRangeError(key, absl::StrCat("expected a value in [", min, ", ", max,
                                               "], but got ", value, " instead"));
    return false;
  }
  *out = value;
  return true;
}

}  // namespace

std::string JsonTypeName(const json& value) {
  switch (value.type()) {
    case json::value_t::null:
      return "null";
    case json::value_t::boolean:
      return "a boolean";
    case json::value_t::string:
      return "a string";
    case json::value_t::array:
      return "an array";
    case json::value_t::object:
      return "an object";
    case json::value_t::number_float:
      return "a decimal";
    default:
      return "an integer";
  }
}

ApiError WrongTypeError(const std::string& param, const std::string& expected, const json& got) {
  return InvalidRequest(param,
                        absl::StrCat("Invalid type for '", param, "': expected ", expected,
                                     ", but got ", JsonTypeName(got), " instead."),
                        "invalid_type");
}

ApiError OutOfRangeError(const std::string& param, const std::string& what) {
  return InvalidRequest(param, absl::StrCat("Invalid '", param, "': ", what, "."), "invalid_value");
}

std::string VoiceVariant(const std::string& voice) {
  // OpenAI's voices, each a distinct espeak-ng variant of "en".
  static const auto* const kVariants = new std::map<std::string, std::string>{
      {"alloy", "f2"}, {"ash", "m2"},     {"ballad", "m4"}, {"coral", "f3"},
      {"echo", "m1"},  {"fable", "m5"},   {"nova", "f4"},   {"onyx", "m7"},
      {"sage", "f1"},  {"shimmer", "f5"}, {"verse", "m6"},
  };
  auto it = kVariants->find(voice);
  return it != kVariants->end() ? it->second : voice;
}

namespace {

// The parts of a chat request, in the order ParseChatRequest reads them; each
// fills its fields of `request`, or says what is wrong.
using Part = std::optional<ApiError>;

// model: the one this gateway serves.
Part ReadModel(const json& parsed, const ServedModel& model, ChatRequest* request) {
  auto model_it = parsed.find("model");
  if (model_it == parsed.end()) {
    return InvalidRequest("model", "Missing required parameter: 'model'.");
  }
  if (!model_it->is_string()) return WrongTypeError("model", "a string", *model_it);
  if (*model_it != model.id) {
    return ApiError{404,
                    "invalid_request_error",
                    absl::StrCat("The model '", model_it->get<std::string>(),
                                 "' does not exist; this gateway serves '", model.id, "'."),
                    "model",
                    "model_not_found",
                    std::nullopt};
  }
  return std::nullopt;
}

// messages: the prompt they make.
Part ReadMessages(const json& parsed, const ServedModel&, ChatRequest* request) {
  auto messages = parsed.find("messages");
  if (messages == parsed.end()) {
    return InvalidRequest("messages", "Missing required parameter: 'messages'.");
  }
  PromptPieces prompt;
  if (std::optional<ApiError> error = Prompt(*messages, &prompt)) return error;
  std::vector<v1::Payload>& pieces = prompt.pieces();
  if (prompt.has_audio()) {
    request->input = std::move(pieces);
    return std::nullopt;
  }
  if (pieces.empty()) {
    return InvalidRequest("messages", "The messages hold no text to answer.", "empty_prompt");
  }
  request->generate.set_prompt(pieces.front().text().text());
  return std::nullopt;
}

// modalities: text, audio or both (text alone when absent).
Part ReadModalities(const json& parsed, const ServedModel&, ChatRequest* request) {
  if (auto it = parsed.find("modalities"); it != parsed.end() && !it->is_null()) {
    if (!it->is_array()) return WrongTypeError("modalities", "an array", *it);
    request->text = false;
    for (size_t i = 0; i < it->size(); ++i) {
      const json& m = (*it)[i];
      const std::string path = absl::StrCat("modalities[", i, "]");
      if (!m.is_string()) return WrongTypeError(path, "a string", m);
      if (m == "text") {
        request->text = true;
      } else if (m == "audio") {
        request->audio = true;
      } else {
        return InvalidRequest(path,
                              absl::StrCat("Invalid value: '", m.get<std::string>(),
                                           "'. Supported values are: 'text' and 'audio'."),
                              "invalid_value");
      }
    }
    if (!request->text && !request->audio) {
      return InvalidRequest("modalities", "Invalid 'modalities': expected 'text', 'audio' or both.",
                            "empty_array");
    }
  }
  if (request->text) request->generate.add_output_modalities(v1::MODALITY_TEXT);
  if (request->audio) request->generate.add_output_modalities(v1::MODALITY_AUDIO);
  return std::nullopt;
}

// audio: its format, and the voice (to the model's voice stage).
Part ReadAudio(const json& parsed, const ServedModel& model, ChatRequest* request) {
  auto it = parsed.find("audio");
  if (it == parsed.end() || it->is_null()) return std::nullopt;
  if (!it->is_object()) return WrongTypeError("audio", "an object", *it);
  if (auto format = it->find("format"); format != it->end() && !format->is_null()) {
    if (!format->is_string()) return WrongTypeError("audio.format", "a string", *format);
    if (*format == "pcm16") {
      request->audio_format = AudioFormat::kPcm16;
    } else if (*format != "wav") {
      return InvalidRequest("audio.format",
                            absl::StrCat("Invalid value: '", format->get<std::string>(),
                                         "'. Supported values are: 'wav' and 'pcm16'."),
                            "unsupported_value");
    }
  }
  if (auto voice = it->find("voice"); voice != it->end() && !voice->is_null()) {
    if (!voice->is_string()) return WrongTypeError("audio.voice", "a string", *voice);
    if (request->audio && model.voice_stage >= 0 && !voice->get<std::string>().empty()) {
      v1::StageParameters* speaker = request->generate.add_stage_params();
      speaker->set_stage_id(model.voice_stage);
      request->voice_stage = model.voice_stage;
      const std::string& name = voice->get<std::string>();
      const std::string variant = VoiceVariant(name);
      (*speaker->mutable_extra())["voice"] = variant;
      request->voice_unvouched = variant == name;
    }
  }
  return std::nullopt;
}

// max_tokens (or max_completion_tokens), seed, temperature and n: the text
// stage's parameters (with the voice, when that stage speaks too).
Part ReadTextStageParams(const json& parsed, const ServedModel& model, ChatRequest* request) {
  v1::StageParameters params;
  params.set_stage_id(model.text_stage);
  request->text_stage = model.text_stage;
  for (int i = 0; i < request->generate.stage_params_size(); ++i) {
    if (request->generate.stage_params(i).stage_id() == model.text_stage) {
      params = request->generate.stage_params(i);
      request->generate.mutable_stage_params()->DeleteSubrange(i, 1);
      break;
    }
  }
  ApiError error;
  std::optional<int64_t> max_tokens, max_completion_tokens, seed, n;
  if (!ReadInt(parsed, "max_tokens", 1, 1000000, &max_tokens, &error) ||
      !ReadInt(parsed, "max_completion_tokens", 1, 1000000, &max_completion_tokens, &error) ||
      !ReadInt(parsed, "seed", INT64_MIN, INT64_MAX, &seed, &error)) {
    return error;
  }
  if (max_completion_tokens.has_value()) max_tokens = max_completion_tokens;
  if (max_tokens.has_value()) params.set_max_tokens(static_cast<uint32_t>(*max_tokens));
  if (seed.has_value()) params.set_seed(static_cast<uint64_t>(*seed));
  if (auto it = parsed.find("temperature"); it != parsed.end() && !it->is_null()) {
    if (!it->is_number()) return WrongTypeError("temperature", "a number", *it);
    const double t = it->get<double>();
    if (t < 0 || t > 2) {
      return OutOfRangeError("temperature",
                             absl::StrCat("expected a value in [0, 2], but got ", t, " instead"));
    }
    params.set_temperature(static_cast<float>(t));
  }
  if (params.has_max_tokens() || params.has_seed() || params.has_temperature() ||
      !params.extra().empty()) {
    *request->generate.add_stage_params() = std::move(params);
  }
  if (!ReadInt(parsed, "n", 1, 1, &n, &error)) return error;
  return std::nullopt;
}

// stream, stream_options.
Part ReadStreaming(const json& parsed, const ServedModel&, ChatRequest* request) {
  if (auto it = parsed.find("stream"); it != parsed.end() && !it->is_null()) {
    if (!it->is_boolean()) return WrongTypeError("stream", "a boolean", *it);
    request->stream = it->get<bool>();
  }
  if (auto it = parsed.find("stream_options"); it != parsed.end() && !it->is_null()) {
    if (!it->is_object()) return WrongTypeError("stream_options", "an object", *it);
    if (!request->stream) {
      return InvalidRequest("stream_options",
                            "The 'stream_options' parameter is only allowed when 'stream' is "
                            "enabled.");
    }
    if (auto usage = it->find("include_usage"); usage != it->end() && !usage->is_null()) {
      if (!usage->is_boolean()) {
        return WrongTypeError("stream_options.include_usage", "a boolean", *usage);
      }
      request->include_usage = usage->get<bool>();
    }
  }
  return std::nullopt;
}

// OpenAI's words for a string past its maximum length.
ApiError TooLong(const std::string& param, const std::string& what, size_t length) {
  return InvalidRequest(
      param,
      absl::StrCat("Invalid '", param, "'", what,
                   ": string too long. Expected "
                   "a string with maximum length ",
                   kMaxSessionKeyBytes, ", but got a string with length ", length, " instead."),
      "string_above_max_length");
}

// user, and the X-Session-Id header: the session key (the header wins).
Part ReadSessionKey(const json& parsed, const std::string& header, ChatRequest* request) {
  if (auto it = parsed.find("user"); it != parsed.end() && !it->is_null()) {
    if (!it->is_string()) return WrongTypeError("user", "a string", *it);
    request->user = it->get<std::string>();
    if (request->user.size() > kMaxSessionKeyBytes) {
      return TooLong("user", "", request->user.size());
    }
  }
  if (header.size() > kMaxSessionKeyBytes) {
    return TooLong(kSessionIdHeader, " header", header.size());
  }
  for (size_t i = 0; i < header.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(header[i]);
    if (c < 0x20 || c > 0x7e) {
      return InvalidRequest(kSessionIdHeader,
                            absl::StrCat("Invalid '", kSessionIdHeader, "' header: byte ", i + 1,
                                         " is not printable ASCII."),
                            "invalid_value");
    }
  }
  request->generate.set_session_key(header.empty() ? request->user : header);
  return std::nullopt;
}

}  // namespace

std::variant<ChatRequest, ApiError> ParseChatRequest(const std::string& body,
                                                     const ServedModel& model,
                                                     const std::string& session_id) {
  std::variant<json, ApiError> read = ReadJsonBody(body);
  if (auto* error = std::get_if<ApiError>(&read)) return *error;
  const json& parsed = std::get<json>(read);
  ChatRequest request;
  for (auto read :
       {ReadModel, ReadMessages, ReadModalities, ReadAudio, ReadTextStageParams, ReadStreaming}) {
    if (std::optional<ApiError> error = read(parsed, model, &request)) return *error;
  }
  if (std::optional<ApiError> error = ReadSessionKey(parsed, session_id, &request)) return *error;
  return request;
}

}  // namespace omnistage
