// The OpenAI Realtime API's events (GA protocol, docs/openai.md "Realtime
// API"), pure: a client event's JSON read and checked, the session's
// configuration as session.update changes it, conversation items, and the
// server events' common shapes (each with its event_id, errors in OpenAI's
// shape). No I/O: realtime_session.h drives them.
//
//   std::variant<ClientEvent, RealtimeError> event = ParseClientEvent(text);
//   if (event->type == "session.update") error = ApplySessionUpdate(event->body, &config);
#ifndef OMNISTAGE_GATEWAY_REALTIME_REALTIME_EVENTS_H_
#define OMNISTAGE_GATEWAY_REALTIME_REALTIME_EVENTS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "nlohmann/json.hpp"

namespace omnistage {

// An `error` server event's error: type invalid_request_error (or
// server_error), a code, the message, the field at fault, and the client
// event's event_id it answers.
struct RealtimeError {
  RealtimeError() = default;
  RealtimeError(std::string code, std::string message, std::string param = "",
                std::string type = "invalid_request_error")
      : code(std::move(code)),
        message(std::move(message)),
        param(std::move(param)),
        type(std::move(type)) {}

  std::string code;
  std::string message;
  std::string param;
  std::string type = "invalid_request_error";
  std::string event_id;
};

// One client event: its type, its event_id ("" when it has none) and the
// whole object.
struct ClientEvent {
  std::string type;
  std::string event_id;
  nlohmann::json body;
};

// A JSON object with a string `type`; else the error (invalid_json,
// missing_type). The type itself is the session's to know.
std::variant<ClientEvent, RealtimeError> ParseClientEvent(const std::string& text);

// turn_detection {type: "server_vad", ...}: the server hears where the user's
// turns start and stop (realtime_turn_detector.h) and commits them.
struct TurnDetection {
  double threshold = 0.5;         // 0..1
  int prefix_padding_ms = 300;    // 0..10000
  int silence_duration_ms = 500;  // 0..10000
  // A response is created when a turn is committed.
  bool create_response = true;
  // The user's speech starting cancels the running response (barge-in).
  bool interrupt_response = true;
};

// What a session answers with (session.update changes it) and a response runs
// with (response.create may override it for that response).
struct RealtimeConfig {
  std::string session_id;
  std::string model;
  // output_modalities: ["audio"] (speech and its transcript) or ["text"].
  bool audio = true;
  std::string instructions;
  std::string voice = "alloy";
  // max_output_tokens: the text stage's max_tokens; nullopt: "inf" (the
  // stage's own limit).
  std::optional<int64_t> max_output_tokens;
  // nullopt: turn_detection null (the client commits and creates responses).
  std::optional<TurnDetection> turn_detection = TurnDetection{};
};

// The session object of session.created and session.updated.
nlohmann::json SessionJson(const RealtimeConfig& config);
// The `audio.output` object of a session or a response.
nlohmann::json AudioOutputJson(const RealtimeConfig& config);

// session.update's `session`: the fields it sets replace `config`'s, or none
// does and the error says why (unknown fields are ignored, as OpenAI does;
// what omnistage cannot do — a transcription session, semantic_vad, tools,
// audio formats other than 24 kHz PCM — is refused). A server_vad
// turn_detection's fields left out take their defaults (TurnDetection).
std::optional<RealtimeError> ApplySessionUpdate(const nlohmann::json& event,
                                                RealtimeConfig* config);
// response.create's `response` (absent: the session's settings as they are):
// output_modalities, instructions, max_output_tokens and audio.output
// override `config` for that response. `conversation` other than "auto",
// `input`, tools: refused.
std::optional<RealtimeError> ApplyResponseCreate(const nlohmann::json& event,
                                                 RealtimeConfig* config);

// A message of the conversation.
struct RealtimeItem {
  std::string id;
  // system, user or assistant.
  std::string role;
  // Its text: the text parts together, or what an assistant said (its
  // transcript).
  std::string text;
  // An assistant's output_audio (text is its transcript) rather than
  // output_text.
  bool audio = false;
  // completed, incomplete (a response cut short) or in_progress.
  std::string status = "completed";
  // An assistant's audio: how long it is (ms), and for each piece of its
  // transcript, the audio sent before it and the text's length with it (what
  // conversation.item.truncate keeps of the text).
  struct TextMark {
    int64_t audio_ms;
    size_t text_end;
  };
  int64_t audio_ms = 0;
  std::vector<TextMark> marks{};
  // A user's audio (input_audio_buffer): text is its transcript (null while
  // empty).
  bool input_audio = false;
};
// A new item id: "item_" and 12 random hex digits.
std::string NewItemId();
// The item as the protocol shows it (type message, object realtime.item).
nlohmann::json ItemJson(const RealtimeItem& item);

// conversation.item.create: the item (its id "" when the client gave none)
// and where it goes (previous_item_id; nullopt: at the end).
struct ItemCreate {
  RealtimeItem item;
  std::optional<std::string> previous_item_id;
};
std::variant<ItemCreate, RealtimeError> ParseItemCreate(const nlohmann::json& event);

// A required string field of an event (item_id, ...); "" when optional and
// absent.
std::variant<std::string, RealtimeError> StringField(const nlohmann::json& event,
                                                     const char* name, bool required);

// A required integer field of an event (content_index, ...).
std::variant<int64_t, RealtimeError> IntegerField(const nlohmann::json& event, const char* name);

// input_audio_buffer.append's audio: the PCM bytes its base64 holds.
std::variant<std::string, RealtimeError> ParseAudioAppend(const nlohmann::json& event);

// A failure as an `error` event's error (and a failed response's
// status_details.error): the chat completions' type and code for its status
// (api_error.h), `pipeline_error` where they have none.
RealtimeError ErrorOfStatus(const absl::Status& status);

// Server events' ids: "event_" and a session's random prefix and a count.
class EventIds {
 public:
  EventIds();
  std::string Next();

 private:
  std::string prefix_;
  uint64_t next_ = 0;
};

// A server event of `type` with the `fields` given and the next event_id,
// serialized.
std::string ServerEvent(EventIds& ids, const char* type, nlohmann::json fields);
// An `error` server event.
std::string ErrorEvent(EventIds& ids, const RealtimeError& error);

}  // namespace omnistage

#endif  // OMNISTAGE_GATEWAY_REALTIME_REALTIME_EVENTS_H_
