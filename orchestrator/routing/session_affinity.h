// SessionAffinity: per stage, the replica that served each session's last
// request (GenerateRequest.session_key; docs/routing.md), so that the next one
// goes there while that replica is live and has a free slot, whatever the
// stage's pick policy: one conversation's turns meet the cache the earlier
// turns filled.
//
// Bounded: at most kMaxSessions sessions per stage (the least recently used go
// first), and a session unused for kSessionIdle is forgotten.
//
// Not thread-safe: owned by its StagePool, on the event loop.
#ifndef OMNISTAGE_ORCHESTRATOR_ROUTING_SESSION_AFFINITY_H_
#define OMNISTAGE_ORCHESTRATOR_ROUTING_SESSION_AFFINITY_H_

#include <cstddef>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "orchestrator/routing/lru_map.h"

namespace omnistage {

class SessionAffinity {
 public:
  static constexpr size_t kMaxSessions = 65536;
  static constexpr absl::Duration kSessionIdle = absl::Minutes(30);

  // The replica of the session's last request, unless forgotten.
  std::optional<int> Last(const std::string& session, absl::Time now) const;
  // The session's request went to `replica`.
  void Record(const std::string& session, int replica, absl::Time now);
  size_t size() const { return sessions_.size(); }

 private:
  LruMap<std::string, int> sessions_;
};

}  // namespace omnistage

#endif  // OMNISTAGE_ORCHESTRATOR_ROUTING_SESSION_AFFINITY_H_
