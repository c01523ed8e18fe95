#include "orchestrator/routing/session_affinity.h"

namespace omnistage {

std::optional<int> SessionAffinity::Last(const std::string& session, absl::Time now) const {
  const LruMap<std::string, int>::Entry* entry = sessions_.Find(session);
  if (entry == nullptr || entry->touched < now - kSessionIdle) return std::nullopt;
  return entry->value;
}

void SessionAffinity::Record(const std::string& session, int replica, absl::Time now) {
  sessions_.Touch(session, now) = replica;
  while (sessions_.size() > kMaxSessions ||
         (sessions_.size() > 0 && sessions_.Oldest()->touched < now - kSessionIdle)) {
    sessions_.PopOldest();
  }
}

}  // namespace omnistage
