#include "gateway/realtime/realtime_events.h"

#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/random_id.h"
#include "gateway/chat/chat_request.h"
#include "gateway/http/api_error.h"

namespace omnistage {
namespace {

using nlohmann::json;

RealtimeError Error(const std::string& code, const std::string& param, std::string message) {
  return RealtimeError{code, std::move(message), param};
}

RealtimeError Missing(const std::string& param) {
  return Error("missing_required_parameter", param,
               absl::StrCat("Missing required parameter: '", param, "'."));
}

RealtimeError WrongType(const std::string& param, const char* expected, const json& got) {
  return Error("invalid_type", param,
               absl::StrCat("Invalid type for '", param, "': expected ", expected, ", but got ",
                            JsonTypeName(got), " instead."));
}

RealtimeError Unsupported(const std::string& param, const std::string& what) {
  return Error("unsupported_value", param, absl::StrCat(what, " is not supported by omnistage."));
}

// A member that is present and not null.
const json* Member(const json& object, const char* name) {
  auto it = object.find(name);
  return it == object.end() || it->is_null() ? nullptr : &*it;
}

// 24 kHz PCM, the one format served.
std::optional<RealtimeError> CheckFormat(const json& format, const std::string& path) {
  if (!format.is_object()) return WrongType(path, "an object", format);
  if (const json* type = Member(format, "type")) {
    if (!type->is_string()) return WrongType(path + ".type", "a string", *type);
    if (*type != "audio/pcm") {
      return Unsupported(path + ".type", absl::StrCat("Audio format '", type->get<std::string>(),
                                                      "' (only 'audio/pcm' is served)"));
    }
  }
  if (const json* rate = Member(format, "rate")) {
    if (!rate->is_number() || rate->get<double>() != 24000) {
      return Error("invalid_value", path + ".rate", "Invalid 'rate': only 24000 is served.");
    }
  }
  return std::nullopt;
}

// A number field of turn_detection in [min, max], if present.
std::optional<RealtimeError> NumberIn(const json& object, const char* name,
                                      const std::string& at, double min, double max,
                                      bool integer, double* value) {
  const json* field = Member(object, name);
  if (field == nullptr) return std::nullopt;
  const std::string path = absl::StrCat(at, ".", name);
  if (integer ? !field->is_number_integer() : !field->is_number()) {
    return WrongType(path, integer ? "an integer" : "a number", *field);
  }
  const double v = field->get<double>();
  if (!(v >= min && v <= max)) {
    return Error("invalid_value", path,
                 absl::StrCat("Invalid '", name, "': expected ", min, " to ", max, ", got ",
                              field->dump(), "."));
  }
  *value = v;
  return std::nullopt;
}

std::optional<RealtimeError> BoolField(const json& object, const char* name,
                                       const std::string& at, bool* value) {
  const json* field = Member(object, name);
  if (field == nullptr) return std::nullopt;
  if (!field->is_boolean()) return WrongType(absl::StrCat(at, ".", name), "a boolean", *field);
  *value = field->get<bool>();
  return std::nullopt;
}

// audio.input.turn_detection: null (manual turns) or server_vad with its
// fields (the ones left out take their defaults).
std::optional<RealtimeError> ApplyTurnDetection(const json& value, const std::string& path,
                                                RealtimeConfig* config) {
  if (value.is_null()) {
    config->turn_detection.reset();
    return std::nullopt;
  }
  if (!value.is_object()) return WrongType(path, "an object or null", value);
  const json* type = Member(value, "type");
  if (type == nullptr) return Missing(path + ".type");
  if (*type == "semantic_vad") {
    return Unsupported(path + ".type", "Semantic VAD (use 'server_vad')");
  }
  if (*type != "server_vad") {
    return Error("invalid_value", path + ".type",
                 absl::StrCat("Invalid value: ", type->dump(),
                              ". Supported values are: 'server_vad' and 'semantic_vad'."));
  }
  if (Member(value, "idle_timeout_ms") != nullptr) {
    return Unsupported(path + ".idle_timeout_ms", "A response on an idle timeout");
  }
  TurnDetection vad;
  double padding = vad.prefix_padding_ms, silence = vad.silence_duration_ms;
  if (auto e = NumberIn(value, "threshold", path, 0, 1, false, &vad.threshold)) return e;
  if (auto e = NumberIn(value, "prefix_padding_ms", path, 0, 10000, true, &padding)) return e;
  if (auto e = NumberIn(value, "silence_duration_ms", path, 0, 10000, true, &silence)) return e;
  if (auto e = BoolField(value, "create_response", path, &vad.create_response)) return e;
  if (auto e = BoolField(value, "interrupt_response", path, &vad.interrupt_response)) return e;
  vad.prefix_padding_ms = static_cast<int>(padding);
  vad.silence_duration_ms = static_cast<int>(silence);
  config->turn_detection = vad;
  return std::nullopt;
}

// The fields session.update and response.create share, from `object` (whose
// path is `at`: "session" or "response").
std::optional<RealtimeError> ApplyCommon(const json& object, const std::string& at,
                                         RealtimeConfig* config) {
  if (const json* modalities = Member(object, "output_modalities")) {
    const std::string path = at + ".output_modalities";
    if (!modalities->is_array()) return WrongType(path, "an array", *modalities);
    bool text = false, audio = false;
    for (const json& m : *modalities) {
      if (m == "text") {
        text = true;
      } else if (m == "audio") {
        audio = true;
      } else {
        return Error("invalid_value", path,
                     absl::StrCat("Invalid value: ", m.dump(),
                                  ". Supported values are: 'text' and 'audio'."));
      }
    }
    if (!text && !audio) {
      return Error("invalid_value", path, "Invalid 'output_modalities': expected ['text'] or "
                                          "['audio'].");
    }
    config->audio = audio;  // Audio comes with its transcript.
  }
  if (const json* instructions = Member(object, "instructions")) {
    if (!instructions->is_string()) {
      return WrongType(at + ".instructions", "a string", *instructions);
    }
    config->instructions = instructions->get<std::string>();
  }
  if (const json* max = Member(object, "max_output_tokens")) {
    const std::string path = at + ".max_output_tokens";
    if (*max == "inf") {
      config->max_output_tokens.reset();
    } else if (!max->is_number_integer()) {
      return WrongType(path, "an integer or 'inf'", *max);
    } else if (max->get<double>() < 1 || max->get<double>() > 1000000) {
      return Error("invalid_value", path, "Invalid 'max_output_tokens': expected 1 to 1000000 "
                                          "or 'inf'.");
    } else {
      config->max_output_tokens = max->get<int64_t>();
    }
  }
  if (const json* tools = Member(object, "tools")) {
    if (!tools->is_array()) return WrongType(at + ".tools", "an array", *tools);
    if (!tools->empty()) return Unsupported(at + ".tools", "Function calling and MCP tools");
  }
  const json* audio = Member(object, "audio");
  if (audio == nullptr) return std::nullopt;
  if (!audio->is_object()) return WrongType(at + ".audio", "an object", *audio);
  if (const json* input = Member(*audio, "input")) {
    const std::string path = at + ".audio.input";
    if (!input->is_object()) return WrongType(path, "an object", *input);
    if (const json* format = Member(*input, "format")) {
      if (auto error = CheckFormat(*format, path + ".format")) return error;
    }
    if (auto it = input->find("turn_detection"); it != input->end()) {
      if (auto error = ApplyTurnDetection(*it, path + ".turn_detection", config)) return error;
    }
    if (Member(*input, "transcription") != nullptr) {
      return Unsupported(path + ".transcription", "Input audio transcription");
    }
  }
  if (const json* output = Member(*audio, "output")) {
    const std::string path = at + ".audio.output";
    if (!output->is_object()) return WrongType(path, "an object", *output);
    if (const json* format = Member(*output, "format")) {
      if (auto error = CheckFormat(*format, path + ".format")) return error;
    }
    if (const json* voice = Member(*output, "voice")) {
      if (!voice->is_string()) return WrongType(path + ".voice", "a string", *voice);
      config->voice = voice->get<std::string>();
    }
  }
  return std::nullopt;
}

json PcmFormat() { return {{"type", "audio/pcm"}, {"rate", 24000}}; }

}  // namespace

std::variant<ClientEvent, RealtimeError> ParseClientEvent(const std::string& text) {
  json body = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded() || !body.is_object()) {
    return Error("invalid_json", "",
                 "The event could not be parsed: it must be a JSON object with a 'type'.");
  }
  ClientEvent event;
  if (const json* id = Member(body, "event_id"); id != nullptr && id->is_string()) {
    event.event_id = id->get<std::string>();
  }
  const json* type = Member(body, "type");
  if (type == nullptr || !type->is_string()) {
    RealtimeError error = type == nullptr ? Missing("type") : WrongType("type", "a string", *type);
    error.event_id = event.event_id;
    return error;
  }
  event.type = type->get<std::string>();
  event.body = std::move(body);
  return event;
}

json AudioOutputJson(const RealtimeConfig& config) {
  return {{"format", PcmFormat()}, {"voice", config.voice}};
}

json SessionJson(const RealtimeConfig& config) {
  json turns = nullptr;
  if (const std::optional<TurnDetection>& vad = config.turn_detection) {
    turns = {{"type", "server_vad"},
             {"threshold", vad->threshold},
             {"prefix_padding_ms", vad->prefix_padding_ms},
             {"silence_duration_ms", vad->silence_duration_ms},
             {"create_response", vad->create_response},
             {"interrupt_response", vad->interrupt_response},
             {"idle_timeout_ms", nullptr}};
  }
  json output = AudioOutputJson(config);
  output["speed"] = 1.0;
  return {{"type", "realtime"},
          {"object", "realtime.session"},
          {"id", config.session_id},
          {"model", config.model},
          {"output_modalities", json::array({config.audio ? "audio" : "text"})},
          {"instructions", config.instructions},
          {"audio",
           {{"input", {{"format", PcmFormat()}, {"transcription", nullptr},
                       {"noise_reduction", nullptr}, {"turn_detection", std::move(turns)}}},
            {"output", std::move(output)}}},
          {"tools", json::array()},
          {"tool_choice", "auto"},
          {"max_output_tokens", config.max_output_tokens.has_value()
                                    ? json(*config.max_output_tokens)
                                    : json("inf")},
          {"tracing", nullptr},
          {"prompt", nullptr},
          {"expires_at", 0}};
}

std::optional<RealtimeError> ApplySessionUpdate(const json& event, RealtimeConfig* config) {
  const json* session = Member(event, "session");
  if (session == nullptr) return Missing("session");
  if (!session->is_object()) return WrongType("session", "an object", *session);
  const json* type = Member(*session, "type");
  if (type == nullptr) return Missing("session.type");
  if (*type == "transcription") {
    return Unsupported("session.type", "A transcription session");
  }
  if (*type != "realtime") {
    return Error("invalid_value", "session.type", "Invalid 'session.type': expected 'realtime'.");
  }
  if (const json* model = Member(*session, "model"); model != nullptr && *model != config->model) {
    return Error("invalid_value", "session.model",
                 absl::StrCat("The model ", model->dump(), " is not served here; this session's "
                              "is '", config->model, "'."));
  }
  RealtimeConfig updated = *config;  // All of it, or none.
  if (auto error = ApplyCommon(*session, "session", &updated)) return error;
  *config = std::move(updated);
  return std::nullopt;
}

std::optional<RealtimeError> ApplyResponseCreate(const json& event, RealtimeConfig* config) {
  const json* response = Member(event, "response");
  if (response == nullptr) return std::nullopt;
  if (!response->is_object()) return WrongType("response", "an object", *response);
  if (const json* conversation = Member(*response, "conversation");
      conversation != nullptr && *conversation != "auto") {
    return Unsupported("response.conversation", "A response outside the conversation");
  }
  if (Member(*response, "input") != nullptr) {
    return Unsupported("response.input", "A response on input of its own");
  }
  return ApplyCommon(*response, "response", config);
}

std::string NewItemId() { return absl::StrCat("item_", RandomHex(12)); }

json ItemJson(const RealtimeItem& item) {
  json part;
  if (item.input_audio) {
    part = {{"type", "input_audio"},
            {"transcript", item.text.empty() ? json(nullptr) : json(item.text)}};
  } else if (item.role != "assistant") {
    part = {{"type", "input_text"}, {"text", item.text}};
  } else if (item.audio) {
    part = {{"type", "output_audio"}, {"transcript", item.text}};
  } else {
    part = {{"type", "output_text"}, {"text", item.text}};
  }
  return {{"id", item.id},     {"object", "realtime.item"}, {"type", "message"},
          {"status", item.status}, {"role", item.role},     {"content", json::array({part})}};
}

std::variant<ItemCreate, RealtimeError> ParseItemCreate(const json& event) {
  const json* item = Member(event, "item");
  if (item == nullptr) return Missing("item");
  if (!item->is_object()) return WrongType("item", "an object", *item);
  ItemCreate create;
  if (const json* previous = Member(event, "previous_item_id")) {
    if (!previous->is_string()) return WrongType("previous_item_id", "a string", *previous);
    create.previous_item_id = previous->get<std::string>();
  }
  if (const json* id = Member(*item, "id")) {
    if (!id->is_string()) return WrongType("item.id", "a string", *id);
    create.item.id = id->get<std::string>();
  }
  const json* type = Member(*item, "type");
  if (type == nullptr) return Missing("item.type");
  if (*type != "message") {
    return Unsupported("item.type", absl::StrCat("An item of type ", type->dump(),
                                                 " (only 'message' is served)"));
  }
  const json* role = Member(*item, "role");
  if (role == nullptr) return Missing("item.role");
  if (*role != "user" && *role != "system" && *role != "assistant") {
    return Error("invalid_value", "item.role",
                 "Invalid 'item.role': expected 'user', 'system' or 'assistant'.");
  }
  create.item.role = role->get<std::string>();
  const json* content = Member(*item, "content");
  if (content == nullptr) return Missing("item.content");
  if (!content->is_array()) return WrongType("item.content", "an array", *content);
  for (size_t i = 0; i < content->size(); ++i) {
    const std::string path = absl::StrCat("item.content[", i, "]");
    const json& part = (*content)[i];
    if (!part.is_object()) return WrongType(path, "an object", part);
    const json* part_type = Member(part, "type");
    if (part_type == nullptr) return Missing(path + ".type");
    const bool text = *part_type == "input_text" || *part_type == "text" ||
                      (create.item.role == "assistant" && *part_type == "output_text");
    if (!text) {
      return Unsupported(path + ".type",
                         absl::StrCat("Content of type ", part_type->dump(), " in a ",
                                      create.item.role, " message (text only; audio goes "
                                      "through input_audio_buffer)"));
    }
    const json* part_text = Member(part, "text");
    if (part_text == nullptr) return Missing(path + ".text");
    if (!part_text->is_string()) return WrongType(path + ".text", "a string", *part_text);
    absl::StrAppend(&create.item.text, part_text->get<std::string>());
  }
  return create;
}

std::variant<std::string, RealtimeError> StringField(const json& event, const char* name,
                                                     bool required) {
  const json* value = Member(event, name);
  if (value == nullptr) {
    if (required) return Missing(name);
    return std::string();
  }
  if (!value->is_string()) return WrongType(name, "a string", *value);
  return value->get<std::string>();
}

std::variant<int64_t, RealtimeError> IntegerField(const json& event, const char* name) {
  const json* value = Member(event, name);
  if (value == nullptr) return Missing(name);
  if (!value->is_number_integer()) return WrongType(name, "an integer", *value);
  return value->get<int64_t>();
}

std::variant<std::string, RealtimeError> ParseAudioAppend(const json& event) {
  std::variant<std::string, RealtimeError> audio = StringField(event, "audio", true);
  if (std::holds_alternative<RealtimeError>(audio)) return audio;
  std::string pcm;
  if (!absl::Base64Unescape(std::get<std::string>(audio), &pcm)) {
    return Error("invalid_value", "audio", "Invalid 'audio': not base64.");
  }
  return pcm;
}

RealtimeError ErrorOfStatus(const absl::Status& status) {
  const ApiError error = FromStatus(status);
  return RealtimeError{error.code.empty() ? "pipeline_error" : error.code, error.message, "",
                       error.type};
}

EventIds::EventIds() : prefix_(absl::StrCat("event_", RandomHex(6))) {}

std::string EventIds::Next() { return absl::StrCat(prefix_, absl::Hex(next_++)); }

std::string ServerEvent(EventIds& ids, const char* type, json fields) {
  fields["type"] = type;
  fields["event_id"] = ids.Next();
  return fields.dump();
}

std::string ErrorEvent(EventIds& ids, const RealtimeError& error) {
  json body = {{"type", error.type}, {"code", error.code}, {"message", error.message}};
  body["param"] = error.param.empty() ? json(nullptr) : json(error.param);
  body["event_id"] = error.event_id.empty() ? json(nullptr) : json(error.event_id);
  return ServerEvent(ids, "error", {{"error", std::move(body)}});
}

}  // namespace omnistage
