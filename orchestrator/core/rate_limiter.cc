#include "orchestrator/core/rate_limiter.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/retry_hint.h"

namespace omnistage {
namespace {

// "'alice'" or "the unauthenticated clients".
std::string Who(const std::string& identity) {
  return identity.empty() ? "the unauthenticated clients" : absl::StrCat("'", identity, "'");
}

}  // namespace

void RateLimiter::Bucket::Refill(double per_second, double capacity, absl::Time now) {
  if (at == absl::InfinitePast()) {
    level = capacity;  // A new identity starts with a full bucket.
  } else if (now > at) {
    level = std::min(capacity, level + per_second * absl::ToDoubleSeconds(now - at));
  }
  at = std::max(at, now);
}

absl::Status RateLimiter::Admit(const Caller& caller, absl::Time now) {
  const RateLimits& limits = caller.rate_limits;
  if (!limits.any()) {
    identities_.erase(caller.identity);
    return absl::OkStatus();
  }
  Identity& identity = identities_[caller.identity];
  identity.limits = limits;
  if (limits.output_tokens_per_minute > 0) {
    const double per_second = limits.output_tokens_per_minute / 60;
    identity.tokens.Refill(per_second, limits.output_tokens_burst, now);
    if (identity.tokens.level < 0) {
      const absl::Duration wait = absl::Seconds(-identity.tokens.level / per_second);
      return RetryLater(absl::StatusCode::kResourceExhausted,
                        absl::StrCat("the output tokens of ", Who(caller.identity), " exceed the ",
                                     limits.output_tokens_per_minute,
                                     " per minute the tokens file allows"),
                        wait);
    }
  }
  if (limits.requests_per_second > 0) {
    identity.requests.Refill(limits.requests_per_second, limits.requests_burst, now);
    if (identity.requests.level < 1) {
      const absl::Duration wait =
          absl::Seconds((1 - identity.requests.level) / limits.requests_per_second);
      return RetryLater(absl::StatusCode::kResourceExhausted,
                        absl::StrCat("the requests of ", Who(caller.identity), " exceed the ",
                                     limits.requests_per_second, " per second (burst ",
                                     limits.requests_burst, ") the tokens file allows"),
                        wait);
    }
    identity.requests.level -= 1;
  }
  return absl::OkStatus();
}

bool RateLimiter::ChargesOutputOf(const std::string& identity) const {
  if (identities_.empty()) return false;
  auto it = identities_.find(identity);
  return it != identities_.end() && it->second.limits.output_tokens_per_minute > 0;
}

void RateLimiter::ChargeOutput(const std::string& identity, int64_t tokens, absl::Time now) {
  auto it = identities_.find(identity);
  if (it == identities_.end() || it->second.limits.output_tokens_per_minute <= 0) return;
  const RateLimits& limits = it->second.limits;
  it->second.tokens.Refill(limits.output_tokens_per_minute / 60, limits.output_tokens_burst, now);
  it->second.tokens.level -= static_cast<double>(tokens);
}

}  // namespace omnistage
