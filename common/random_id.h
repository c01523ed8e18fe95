// Unguessable identifiers: request ids the orchestrator generates and worker
// session ids. Drawn from OpenSSL's CSPRNG, so knowing earlier ids tells nothing
// about the next one.
//
//   std::string id = absl::StrCat("req-", RandomHex(16));  // 128 bits
#ifndef OMNISTAGE_COMMON_RANDOM_ID_H_
#define OMNISTAGE_COMMON_RANDOM_ID_H_

#include <cstddef>
#include <string>

namespace omnistage {

// 2 * `bytes` lowercase hex digits of cryptographic randomness. Aborts the
// process if the system cannot supply randomness (nothing safe could follow).
std::string RandomHex(size_t bytes);

}  // namespace omnistage

#endif  // OMNISTAGE_COMMON_RANDOM_ID_H_
