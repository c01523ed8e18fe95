// Caller: who makes a call to the orchestrator, and what it may do beyond its
// own requests (docs/security.md, "What each credential grants").
#ifndef OMNISTAGE_ORCHESTRATOR_CORE_CALLER_H_
#define OMNISTAGE_ORCHESTRATOR_CORE_CALLER_H_

#include <string>
#include <utility>

#include "orchestrator/config/objective_defaults.h"

namespace omnistage {

// Priorities run from 0 to this.
inline constexpr int kMaxPriority = 9;
// The admission queue's place for work that can wait (GenerateRequest.batch):
// below every priority a request may ask for.
inline constexpr int kBatchPriority = -1;

// An identity's rates (the tokens file); 0: no limit. Token buckets: a
// request takes one of `requests_burst`, refilled at `requests_per_second`;
// the output tokens its requests produce are charged to `output_tokens_burst`,
// refilled at `output_tokens_per_minute`, and a new request waits while that
// bucket is below empty (rate_limiter.h).
struct RateLimits {
  double requests_per_second = 0;
  double requests_burst = 0;
  double output_tokens_per_minute = 0;
  double output_tokens_burst = 0;
  bool any() const { return requests_per_second > 0 || output_tokens_per_minute > 0; }
};

struct Caller {
  // A caller with the default priority, weight and no rates.
  static Caller Of(std::string identity, bool admin = false, bool abort_any = false) {
    Caller caller;
    caller.identity = std::move(identity);
    caller.admin = admin;
    caller.abort_any = abort_any;
    return caller;
  }

  // "" when authentication is off. It owns the requests it starts.
  std::string identity;
  // The operator's calls (GetPipelineStatus, CallStageUtility).
  bool admin = false;
  // Abort any identity's request, not only its own: the holder of an admin
  // token. (A client certificate's identity is an admin for the operator's
  // calls, but owns only its own requests.)
  bool abort_any = false;
  // May run requests as another identity (GenerateRequest.on_behalf_of): a
  // front end's token (role gateway).
  bool acts_for_others = false;
  // Its requests' priority when they do not ask for one, the highest they may
  // ask for (GenerateRequest.priority), and its share of the admission queue
  // among the identities of one priority (admission_queue.h).
  int priority = 0;
  int max_priority = kMaxPriority;
  int weight = 1;
  RateLimits rate_limits;
  // The latency objectives of its requests that set none (before the
  // pipeline's).
  ObjectiveDefaults objectives;
};

}  // namespace omnistage

#endif  // OMNISTAGE_ORCHESTRATOR_CORE_CALLER_H_
