// Unguessable identifiers (request ids the orchestrator generates, worker
// session ids) and their comparison. Drawn from OpenSSL's CSPRNG, so knowing earlier ids tells nothing
// about the next one.
//
//   std::string id = absl::StrCat("req-", RandomHex(16));  // 128 bits
#ifndef OMNISTAGE_COMMON_RANDOM_ID_H_
#define OMNISTAGE_COMMON_RANDOM_ID_H_

#include <cstddef>
#include <string>

#include "absl/strings/string_view.h"

namespace omnistage {

// 2 * `bytes` lowercase hex digits of cryptographic randomness. Aborts the
// process if the system cannot supply randomness (nothing safe could follow).
std::string RandomHex(size_t bytes);

// Whether two secrets (ids, token digests) are equal, in time that depends only
// on their lengths, so that timing does not reveal how much of a guess matched.
bool SameSecret(absl::string_view a, absl::string_view b);

}  // namespace omnistage

#endif  // OMNISTAGE_COMMON_RANDOM_ID_H_
