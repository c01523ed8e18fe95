// Caller: who makes a call to the orchestrator, and what it may do beyond its
// own requests (docs/security.md, "What each credential grants").
#ifndef OMNISTAGE_ORCHESTRATOR_CORE_CALLER_H_
#define OMNISTAGE_ORCHESTRATOR_CORE_CALLER_H_

#include <string>

namespace omnistage {

// Priorities run from 0 to this.
inline constexpr int kMaxPriority = 9;

struct Caller {
  // "" when authentication is off. It owns the requests it starts.
  std::string identity;
  // The operator's calls (GetPipelineStatus, CallStageUtility).
  bool admin = false;
  // Abort any identity's request, not only its own: the holder of an admin
  // token. (A client certificate's identity is an admin for the operator's
  // calls, but owns only its own requests.)
  bool abort_any = false;
  // Its requests' priority when they do not ask for one, the highest they may
  // ask for (GenerateRequest.priority), and its share of the admission queue
  // among the identities of one priority (admission_queue.h).
  int priority = 0;
  int max_priority = kMaxPriority;
  int weight = 1;
};

}  // namespace omnistage

#endif  // OMNISTAGE_ORCHESTRATOR_CORE_CALLER_H_
