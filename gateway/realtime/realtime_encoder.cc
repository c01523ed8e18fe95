#include "gateway/realtime/realtime_encoder.h"

#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/random_id.h"
#include "gateway/chat/chat_response.h"

namespace omnistage {
namespace {

using nlohmann::json;

// The one audio format the protocol's pcm carries.
constexpr int kSampleRateHz = 24000;

}  // namespace

RealtimeEncoder::RealtimeEncoder(EventIds& ids, RealtimeConfig config,
                                 std::string conversation_id, const std::string& prompt)
    : ids_(ids),
      config_(std::move(config)),
      conversation_id_(std::move(conversation_id)),
      response_id_(absl::StrCat("resp_", RandomHex(12))),
      input_tokens_(WordCount(prompt)) {
  item_.id = NewItemId();
  item_.role = "assistant";
  item_.audio = config_.audio;
  item_.status = "in_progress";
}

json RealtimeEncoder::Response(const char* status, json details) const {
  json response = {
      {"id", response_id_},
      {"object", "realtime.response"},
      {"status", status},
      {"status_details", std::move(details)},
      {"output", begun_ ? json::array({ItemJson(item_)}) : json::array()},
      {"conversation_id", conversation_id_},
      {"output_modalities", json::array({config_.audio ? "audio" : "text"})},
      {"max_output_tokens",
       config_.max_output_tokens.has_value() ? json(*config_.max_output_tokens) : json("inf")},
      {"audio", {{"output", AudioOutputJson(config_)}}},
      {"metadata", nullptr}};
  response["usage"] = usage_.empty() ? json(nullptr) : json::parse(usage_);
  return response;
}

json RealtimeEncoder::Where() const {
  return {{"response_id", response_id_}, {"item_id", item_.id}, {"output_index", 0},
          {"content_index", 0}};
}

std::string RealtimeEncoder::Created() {
  return ServerEvent(ids_, "response.created", {{"response", Response("in_progress", nullptr)}});
}

std::vector<std::string> RealtimeEncoder::Begin(const std::string& previous_item_id) {
  begun_ = true;
  RealtimeItem empty = item_;
  json item = ItemJson(empty);
  item["content"] = json::array();
  json previous = previous_item_id.empty() ? json(nullptr) : json(previous_item_id);
  json part = Where();
  part["part"] = config_.audio ? json{{"type", "audio"}, {"transcript", ""}}
                               : json{{"type", "text"}, {"text", ""}};
  return {ServerEvent(ids_, "response.output_item.added",
                      {{"response_id", response_id_}, {"output_index", 0}, {"item", item}}),
          ServerEvent(ids_, "conversation.item.added",
                      {{"item", item}, {"previous_item_id", std::move(previous)}}),
          ServerEvent(ids_, "response.content_part.added", std::move(part))};
}

std::vector<std::string> RealtimeEncoder::Events(const v1::GenerateResponse& response) {
  std::vector<std::string> events;
  for (const v1::OutputChunk& chunk : response.outputs()) {
    const v1::Payload& payload = chunk.payload();
    if (payload.has_text() && !payload.text().text().empty()) {
      const std::string& text = payload.text().text();
      item_.text += text;
      item_.marks.push_back({item_.audio_ms, item_.text.size()});
      json delta = Where();
      delta["delta"] = text;
      events.push_back(ServerEvent(ids_,
                                   config_.audio ? "response.output_audio_transcript.delta"
                                                 : "response.output_text.delta",
                                   std::move(delta)));
    } else if (payload.has_audio() && config_.audio) {
      const v1::AudioChunk& audio = payload.audio();
      if (audio.sample_rate_hz() != kSampleRateHz || audio.channels() > 1) {
        failure_ = RealtimeError{
            "unsupported_audio",
            absl::StrCat("The pipeline speaks ", audio.sample_rate_hz(), " Hz audio in ",
                         audio.channels(), " channel(s); the Realtime API's audio/pcm is 24000 "
                         "Hz mono."),
            "", "server_error"};
        return events;
      }
      audio_bytes_ += static_cast<int64_t>(audio.pcm_s16le().size());
      item_.audio_ms = audio_bytes_ * 1000 / (2 * kSampleRateHz);
      json delta = Where();
      delta["delta"] = absl::Base64Escape(audio.pcm_s16le());
      events.push_back(ServerEvent(ids_, "response.output_audio.delta", std::move(delta)));
    }
  }
  return events;
}

std::vector<std::string> RealtimeEncoder::Finish(Status status, const RealtimeError* error) {
  const int64_t text_tokens = WordCount(item_.text);
  // Audio "tokens": its seconds at 10 a second, a rough measure as words are.
  const int64_t audio_tokens = audio_bytes_ / (2 * kSampleRateHz / 10);
  usage_ = json({{"total_tokens", input_tokens_ + text_tokens + audio_tokens},
                 {"input_tokens", input_tokens_},
                 {"output_tokens", text_tokens + audio_tokens},
                 {"input_token_details",
                  {{"text_tokens", input_tokens_}, {"audio_tokens", 0}, {"cached_tokens", 0}}},
                 {"output_token_details",
                  {{"text_tokens", text_tokens}, {"audio_tokens", audio_tokens}}}})
               .dump();
  item_.status = status == Status::kCompleted ? "completed" : "incomplete";
  std::vector<std::string> events;
  if (begun_) {
    json done = Where();
    if (config_.audio) {
      events.push_back(ServerEvent(ids_, "response.output_audio.done", done));
      json transcript = done;
      transcript["transcript"] = item_.text;
      events.push_back(
          ServerEvent(ids_, "response.output_audio_transcript.done", std::move(transcript)));
      done["part"] = {{"type", "audio"}, {"transcript", item_.text}};
    } else {
      json text = done;
      text["text"] = item_.text;
      events.push_back(ServerEvent(ids_, "response.output_text.done", std::move(text)));
      done["part"] = {{"type", "text"}, {"text", item_.text}};
    }
    events.push_back(ServerEvent(ids_, "response.content_part.done", std::move(done)));
    const json item = ItemJson(item_);
    events.push_back(ServerEvent(ids_, "response.output_item.done",
                                 {{"response_id", response_id_}, {"output_index", 0},
                                  {"item", item}}));
    events.push_back(ServerEvent(ids_, "conversation.item.done", {{"item", item}}));
  }
  json details;
  const char* name = "completed";
  switch (status) {
    case Status::kCompleted:
      details = nullptr;
      break;
    case Status::kIncomplete:
      name = "incomplete";
      details = {{"type", "incomplete"}, {"reason", "max_output_tokens"}};
      break;
    case Status::kCancelled:
    case Status::kInterrupted:
      name = "cancelled";
      details = {{"type", "cancelled"},
                 {"reason", status == Status::kCancelled ? "client_cancelled" : "turn_detected"}};
      break;
    case Status::kFailed:
      name = "failed";
      details = {{"type", "failed"}};
      if (error != nullptr) {
        details["error"] = {{"type", error->type}, {"code", error->code},
                            {"message", error->message}};
      }
      break;
  }
  events.push_back(ServerEvent(ids_, "response.done", {{"response", Response(name, details)}}));
  return events;
}

absl::string_view RealtimeEncoder::StatusName(Status status) {
  switch (status) {
    case Status::kCompleted:
      return "completed";
    case Status::kIncomplete:
      return "incomplete";
    case Status::kCancelled:
      return "cancelled";
    case Status::kInterrupted:
      return "interrupted";
    case Status::kFailed:
      break;
  }
  return "failed";
}

std::string RealtimeEncoder::FailedBeforeBegin(const RealtimeError& error) {
  return Finish(Status::kFailed, &error).back();
}

}  // namespace omnistage
