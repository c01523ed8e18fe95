// RateLimiter: each identity's request rate and output-token rate, as token
// buckets (caller.h, RateLimits; the tokens file sets them, docs/security.md).
//
// - Requests: a bucket of `requests_burst`, refilled at `requests_per_second`;
//   each admitted request takes one. Empty: refused with RESOURCE_EXHAUSTED
//   naming the rate and, as its retry hint, when the next one may come.
// - Output tokens: charged after the fact, as the identity's requests produce
//   them (one per token id, one per word of text, sent to the client; audio
//   is not counted), to a bucket of `output_tokens_burst` refilled at
//   `output_tokens_per_minute`, which may go below empty. A new request is
//   refused while it is, with the time until it is empty again as its hint.
//
// Identities without limits take no memory; the others are few (they come
// from the tokens file). Time is the caller's (the core's scheduler), so the
// tests run on the manual clock.
//
// Not thread-safe: owned by the orchestrator's event loop.
#ifndef OMNISTAGE_ORCHESTRATOR_CORE_RATE_LIMITER_H_
#define OMNISTAGE_ORCHESTRATOR_CORE_RATE_LIMITER_H_

#include <cstdint>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "orchestrator/core/caller.h"

namespace omnistage {

class RateLimiter {
 public:
  // Takes one request of `caller` at `now`: OK, or RESOURCE_EXHAUSTED with a
  // retry hint (common/retry_hint.h) naming the limit. `caller`'s limits
  // replace those seen before (the tokens file may have changed).
  absl::Status Admit(const Caller& caller, absl::Time now);
  // Whether `identity`'s output is counted (it has an output-token rate).
  bool ChargesOutputOf(const std::string& identity) const;
  // `identity` produced `tokens` output tokens at `now`.
  void ChargeOutput(const std::string& identity, int64_t tokens, absl::Time now);

 private:
  struct Bucket {
    double level = 0;
    absl::Time at = absl::InfinitePast();
    // Refills to `now` at `per_second`, up to `capacity`.
    void Refill(double per_second, double capacity, absl::Time now);
  };
  struct Identity {
    RateLimits limits;
    Bucket requests;
    Bucket tokens;
  };

  absl::flat_hash_map<std::string, Identity> identities_;
};

}  // namespace omnistage

#endif  // OMNISTAGE_ORCHESTRATOR_CORE_RATE_LIMITER_H_
