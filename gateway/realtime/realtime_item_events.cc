#include "gateway/realtime/realtime_item_events.h"

#include <optional>
#include <utility>
#include <variant>

#include "absl/strings/str_cat.h"

namespace omnistage {
namespace {

using nlohmann::json;

RealtimeError NotFound(const std::string& id) {
  return {"item_not_found", absl::StrCat("No item '", id, "' in the conversation."), "item_id"};
}

}  // namespace

RealtimeItemEvents::RealtimeItemEvents(EventIds* ids, RealtimeConversation* conversation,
                                       std::function<void(const std::string&)> send)
    : ids_(ids), conversation_(conversation), send_(std::move(send)) {}

void RealtimeItemEvents::SendError(RealtimeError error, const std::string& event_id) {
  error.event_id = event_id;
  send_(ErrorEvent(*ids_, error));
}

void RealtimeItemEvents::Create(const ClientEvent& event) {
  std::variant<ItemCreate, RealtimeError> parsed = ParseItemCreate(event.body);
  if (std::holds_alternative<RealtimeError>(parsed)) {
    SendError(std::get<RealtimeError>(parsed), event.event_id);
    return;
  }
  auto& create = std::get<ItemCreate>(parsed);
  std::string previous;
  if (auto error = conversation_->Add(&create.item, create.previous_item_id, &previous)) {
    SendError(*error, event.event_id);
    return;
  }
  const json item = ItemJson(create.item);
  const json before = previous.empty() ? json(nullptr) : json(previous);
  send_(ServerEvent(*ids_, "conversation.item.added",
                    {{"item", item}, {"previous_item_id", before}}));
  send_(
      ServerEvent(*ids_, "conversation.item.done", {{"item", item}, {"previous_item_id", before}}));
}

void RealtimeItemEvents::Delete(const ClientEvent& event) {
  std::variant<std::string, RealtimeError> id = StringField(event.body, "item_id", true);
  if (std::holds_alternative<RealtimeError>(id)) {
    SendError(std::get<RealtimeError>(id), event.event_id);
  } else if (!conversation_->Delete(std::get<std::string>(id))) {
    SendError(NotFound(std::get<std::string>(id)), event.event_id);
  } else {
    send_(
        ServerEvent(*ids_, "conversation.item.deleted", {{"item_id", std::get<std::string>(id)}}));
  }
}

void RealtimeItemEvents::Retrieve(const ClientEvent& event) {
  std::variant<std::string, RealtimeError> id = StringField(event.body, "item_id", true);
  if (std::holds_alternative<RealtimeError>(id)) {
    SendError(std::get<RealtimeError>(id), event.event_id);
    return;
  }
  const RealtimeItem* item = conversation_->Find(std::get<std::string>(id));
  if (item == nullptr) {
    SendError(NotFound(std::get<std::string>(id)), event.event_id);
    return;
  }
  send_(ServerEvent(*ids_, "conversation.item.retrieved", {{"item", ItemJson(*item)}}));
}

void RealtimeItemEvents::Truncate(const ClientEvent& event) {
  std::variant<std::string, RealtimeError> id = StringField(event.body, "item_id", true);
  std::variant<int64_t, RealtimeError> index = IntegerField(event.body, "content_index");
  std::variant<int64_t, RealtimeError> end = IntegerField(event.body, "audio_end_ms");
  for (const RealtimeError* error :
       {std::get_if<RealtimeError>(&id), std::get_if<RealtimeError>(&index),
        std::get_if<RealtimeError>(&end)}) {
    if (error != nullptr) {
      SendError(*error, event.event_id);
      return;
    }
  }
  if (std::optional<RealtimeError> error = TruncateItem(
          std::get<std::string>(id), std::get<int64_t>(index), std::get<int64_t>(end))) {
    SendError(*error, event.event_id);
  }
}

bool RealtimeItemEvents::Truncated(const std::string& id, int64_t audio_end_ms) {
  return !TruncateItem(id, 0, audio_end_ms).has_value();
}

std::optional<RealtimeError> RealtimeItemEvents::TruncateItem(const std::string& id,
                                                              int64_t content_index,
                                                              int64_t audio_end_ms) {
  if (auto error = conversation_->Truncate(id, content_index, audio_end_ms)) return error;
  send_(ServerEvent(*ids_, "conversation.item.truncated",
                    {{"item_id", id}, {"content_index", 0}, {"audio_end_ms", audio_end_ms}}));
  return std::nullopt;
}

}  // namespace omnistage
