// RealtimeConversation: a Realtime session's conversation — its items in
// order, as conversation.item.create (and each response) adds them — and the
// Generate request a response runs: the conversation as a chat completion's
// messages (instructions first, as a system message) read by the same
// ParseChatRequest the chat completions use, so the prompt, the voice and
// the text stage's parameters are built the one way (docs/openai.md).
// Pure: no I/O.
#ifndef OMNISTAGE_GATEWAY_REALTIME_REALTIME_CONVERSATION_H_
#define OMNISTAGE_GATEWAY_REALTIME_REALTIME_CONVERSATION_H_

#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "gateway/chat/chat_request.h"
#include "gateway/realtime/realtime_events.h"

namespace omnistage {

class RealtimeConversation {
 public:
  // Items beyond this are refused (a session's memory stays bounded).
  static constexpr size_t kMaxItems = 4096;

  // Adds `item` (an id is made when it has none) after `previous_item_id`
  // ("root": first; nullopt: last). On success `*previous` is the id of the
  // item before it ("" for none). Refused: an id already used, an unknown
  // previous_item_id, too many items.
  std::optional<RealtimeError> Add(RealtimeItem* item,
                                   const std::optional<std::string>& previous_item_id,
                                   std::string* previous);
  // nullptr when no item has that id.
  const RealtimeItem* Find(const std::string& id) const;
  // Sets the text of the item `id` (an audio item's transcript as it grows);
  // false when there is none.
  bool SetText(const std::string& id, const std::string& text);
  bool Delete(const std::string& id);
  // conversation.item.truncate: the assistant audio item `id` ends at
  // `audio_end_ms` (what the user heard), and its transcript with the text
  // that came before the audio past that point. Refused: no such item, not an
  // assistant's audio, a content_index other than 0, a point past its audio.
  std::optional<RealtimeError> Truncate(const std::string& id, int64_t content_index,
                                        int64_t audio_end_ms);
  size_t size() const { return items_.size(); }
  // The last item's id ("" when there is none).
  std::string last_id() const { return items_.empty() ? "" : items_.back().id; }

  // The chat request a response with `config` runs: modalities text, or text
  // and audio (pcm16, `config.voice`), max_output_tokens as
  // max_completion_tokens. An error when there is nothing to answer.
  std::variant<ChatRequest, RealtimeError> Request(const RealtimeConfig& config,
                                                   const ServedModel& model) const;
  // The request an audio turn opens GenerateDuplex with: as Request()'s, but
  // its prompt is the conversation so far and a line break (empty when there
  // is none), which the audio's words follow. Stage 0 passes that text
  // through first: realtime_audio_input.h skips its echo.
  std::variant<ChatRequest, RealtimeError> AudioTurnRequest(const RealtimeConfig& config,
                                                            const ServedModel& model) const;

 private:
  // The conversation as chat messages (instructions first).
  nlohmann::json Messages(const RealtimeConfig& config) const;
  std::variant<ChatRequest, RealtimeError> Parse(nlohmann::json messages,
                                                 const RealtimeConfig& config,
                                                 const ServedModel& model) const;

  std::vector<RealtimeItem> items_;
};

}  // namespace omnistage

#endif  // OMNISTAGE_GATEWAY_REALTIME_REALTIME_CONVERSATION_H_
