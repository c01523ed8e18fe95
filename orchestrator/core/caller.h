// Caller: who makes a call to the orchestrator, and what it may do beyond its
// own requests (docs/security.md, "What each credential grants").
#ifndef OMNISTAGE_ORCHESTRATOR_CORE_CALLER_H_
#define OMNISTAGE_ORCHESTRATOR_CORE_CALLER_H_

#include <string>

namespace omnistage {

struct Caller {
  // "" when authentication is off. It owns the requests it starts.
  std::string identity;
  // The operator's calls (GetPipelineStatus, CallStageUtility).
  bool admin = false;
  // Abort any identity's request, not only its own: the holder of an admin
  // token. (A client certificate's identity is an admin for the operator's
  // calls, but owns only its own requests.)
  bool abort_any = false;
};

}  // namespace omnistage

#endif  // OMNISTAGE_ORCHESTRATOR_CORE_CALLER_H_
