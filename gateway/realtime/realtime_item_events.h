// RealtimeItemEvents: a Realtime session's conversation.item.* client events
// (create, delete, retrieve, truncate) against its conversation
// (realtime_conversation.h), each answered with its server event or an
// `error` (docs/openai.md, "Realtime API"). The session's loop; no I/O of its
// own: the session's `send` writes the events.
#ifndef OMNISTAGE_GATEWAY_REALTIME_REALTIME_ITEM_EVENTS_H_
#define OMNISTAGE_GATEWAY_REALTIME_REALTIME_ITEM_EVENTS_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "gateway/realtime/realtime_conversation.h"
#include "gateway/realtime/realtime_events.h"

namespace omnistage {

class RealtimeItemEvents {
 public:
  RealtimeItemEvents(EventIds* ids, RealtimeConversation* conversation,
                     std::function<void(const std::string&)> send);

  void Create(const ClientEvent& event);
  void Delete(const ClientEvent& event);
  void Retrieve(const ClientEvent& event);
  void Truncate(const ClientEvent& event);
  // The item `id` truncated at `audio_end_ms` and conversation.item.truncated
  // sent (the server's own, at a barge-in); false when it could not be.
  bool Truncated(const std::string& id, int64_t audio_end_ms);

 private:
  void SendError(RealtimeError error, const std::string& event_id);
  // Truncates the item and sends conversation.item.truncated; else the error.
  std::optional<RealtimeError> TruncateItem(const std::string& id, int64_t content_index,
                                            int64_t audio_end_ms);

  EventIds* const ids_;
  RealtimeConversation* const conversation_;
  const std::function<void(const std::string&)> send_;
};

}  // namespace omnistage

#endif  // OMNISTAGE_GATEWAY_REALTIME_REALTIME_ITEM_EVENTS_H_
