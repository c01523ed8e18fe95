#include "gateway/realtime/realtime_conversation.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace omnistage {

using nlohmann::json;

std::optional<RealtimeError> RealtimeConversation::Add(
    RealtimeItem* item, const std::optional<std::string>& previous_item_id,
    std::string* previous) {
  if (items_.size() >= kMaxItems) {
    return RealtimeError{"conversation_too_long",
                         absl::StrCat("The conversation holds ", kMaxItems,
                                      " items, as many as a session may; delete some."),
                         "item"};
  }
  if (item->id.empty()) item->id = NewItemId();
  if (item->id.size() > 64) {
    return RealtimeError{"invalid_value", "Invalid 'item.id': at most 64 characters.", "item.id"};
  }
  if (Find(item->id) != nullptr) {
    return RealtimeError{"item_id_taken",
                         absl::StrCat("An item with id '", item->id, "' is in the conversation."),
                         "item.id"};
  }
  auto at = items_.end();
  if (previous_item_id.has_value() && *previous_item_id == "root") {
    at = items_.begin();
  } else if (previous_item_id.has_value()) {
    at = std::find_if(items_.begin(), items_.end(),
                      [&](const RealtimeItem& i) { return i.id == *previous_item_id; });
    if (at == items_.end()) {
      return RealtimeError{"item_not_found",
                           absl::StrCat("previous_item_id '", *previous_item_id,
                                        "' is no item of the conversation."),
                           "previous_item_id"};
    }
    ++at;
  }
  *previous = at == items_.begin() ? "" : std::prev(at)->id;
  items_.insert(at, *item);
  return std::nullopt;
}

const RealtimeItem* RealtimeConversation::Find(const std::string& id) const {
  for (const RealtimeItem& item : items_) {
    if (item.id == id) return &item;
  }
  return nullptr;
}

std::optional<RealtimeError> RealtimeConversation::Truncate(const std::string& id,
                                                            int64_t content_index,
                                                            int64_t audio_end_ms) {
  auto it = std::find_if(items_.begin(), items_.end(),
                         [&](const RealtimeItem& i) { return i.id == id; });
  if (it == items_.end()) {
    return RealtimeError{"item_not_found",
                         absl::StrCat("No item '", id, "' in the conversation."), "item_id"};
  }
  if (it->role != "assistant" || !it->audio) {
    return RealtimeError{"invalid_value",
                         absl::StrCat("Item '", id, "' is no assistant audio: only an "
                                      "assistant's audio can be truncated."),
                         "item_id"};
  }
  if (content_index != 0) {
    return RealtimeError{"invalid_value",
                         absl::StrCat("Invalid 'content_index': item '", id,
                                      "' has one content part, 0."),
                         "content_index"};
  }
  if (audio_end_ms < 0 || audio_end_ms > it->audio_ms) {
    return RealtimeError{"invalid_value",
                         absl::StrCat("Invalid 'audio_end_ms': ", audio_end_ms,
                                      " is outside item '", id, "''s audio (0 to ",
                                      it->audio_ms, " ms)."),
                         "audio_end_ms"};
  }
  // The transcript's pieces whose audio had begun by then.
  size_t keep = 0;
  for (const RealtimeItem::TextMark& mark : it->marks) {
    if (mark.audio_ms >= audio_end_ms) break;
    keep = mark.text_end;
  }
  it->text.resize(std::min(keep, it->text.size()));
  it->audio_ms = audio_end_ms;
  while (!it->marks.empty() && it->marks.back().text_end > it->text.size()) it->marks.pop_back();
  return std::nullopt;
}

bool RealtimeConversation::Delete(const std::string& id) {
  auto it = std::find_if(items_.begin(), items_.end(),
                         [&](const RealtimeItem& i) { return i.id == id; });
  if (it == items_.end()) return false;
  items_.erase(it);
  return true;
}

bool RealtimeConversation::SetText(const std::string& id, const std::string& text) {
  for (RealtimeItem& item : items_) {
    if (item.id != id) continue;
    item.text = text;
    return true;
  }
  return false;
}

json RealtimeConversation::Messages(const RealtimeConfig& config) const {
  json messages = json::array();
  if (!config.instructions.empty()) {
    messages.push_back({{"role", "system"}, {"content", config.instructions}});
  }
  for (const RealtimeItem& item : items_) {
    // What an assistant did not get to say (a cut response with no text yet)
    // is no message, nor is audio nothing was heard in.
    if (item.text.empty() && (item.role == "assistant" || item.input_audio)) continue;
    messages.push_back({{"role", item.role}, {"content", item.text}});
  }
  return messages;
}

std::variant<ChatRequest, RealtimeError> RealtimeConversation::Request(
    const RealtimeConfig& config, const ServedModel& model) const {
  json messages = Messages(config);
  if (messages.empty()) {
    return RealtimeError{"empty_conversation",
                         "There is nothing to respond to: add a message "
                         "(conversation.item.create) or instructions first.",
                         ""};
  }
  return Parse(std::move(messages), config, model);
}

std::variant<ChatRequest, RealtimeError> RealtimeConversation::AudioTurnRequest(
    const RealtimeConfig& config, const ServedModel& model) const {
  json messages = Messages(config);
  const bool empty = messages.empty();
  // The parameters are read as for any request; with no message yet, from
  // one that holds a placeholder, whose prompt is then dropped.
  if (empty) messages.push_back({{"role", "user"}, {"content", "-"}});
  std::variant<ChatRequest, RealtimeError> request = Parse(std::move(messages), config, model);
  if (auto* chat = std::get_if<ChatRequest>(&request)) {
    chat->generate.set_prompt(empty ? "" : chat->generate.prompt() + "\n");
  }
  return request;
}

std::variant<ChatRequest, RealtimeError> RealtimeConversation::Parse(
    json messages, const RealtimeConfig& config, const ServedModel& model) const {
  json body = {{"model", model.id}, {"messages", std::move(messages)}};
  if (config.audio) {
    body["modalities"] = {"text", "audio"};
    body["audio"] = {{"voice", config.voice}, {"format", "pcm16"}};
  } else {
    body["modalities"] = {"text"};
  }
  if (config.max_output_tokens.has_value()) {
    body["max_completion_tokens"] = *config.max_output_tokens;
  }
  std::variant<ChatRequest, ApiError> parsed = ParseChatRequest(body.dump(), model);
  if (std::holds_alternative<ApiError>(parsed)) {
    const ApiError& error = std::get<ApiError>(parsed);
    return RealtimeError{error.code.empty() ? "invalid_value" : error.code, error.message, ""};
  }
  return std::get<ChatRequest>(std::move(parsed));
}

}  // namespace omnistage
