// Bearer tokens as the clients read them — from a file, an environment
// variable or an HTTP Authorization header. Surrounding whitespace (the newline
// that `$(cat user.token)` or an editor leaves) is not part of a token. Inside,
// a token is visible ASCII without spaces (docs/security.md, tokens file): any
// other byte could not travel as gRPC metadata (gRPC refuses the call, and its
// C++ client aborts on it), so it is refused here with a message that names
// where the token came from — and never the token, or any part of it.
//
//   absl::StatusOr<std::string> token = CleanBearerToken(raw, "$OMNISTAGE_TOKEN");
//   if (!token.ok()) { std::cerr << token.status().message(); ... }
#ifndef OMNISTAGE_COMMON_BEARER_TOKEN_H_
#define OMNISTAGE_COMMON_BEARER_TOKEN_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace omnistage {

// `raw` without surrounding ASCII whitespace; "" when nothing else is left (no
// token). INVALID_ARGUMENT when what is left holds a space, a control character
// or a byte beyond ASCII: "<source>: the bearer token holds a control character
// (character 12); ...".
absl::StatusOr<std::string> CleanBearerToken(absl::string_view raw, absl::string_view source);

// The token the file at `path` holds, cleaned as above, for the flag that
// named the file (`flag`, e.g. "--token_file"): INVALID_ARGUMENT
// "<flag>: cannot read <path>" when it cannot be read, CleanBearerToken's
// errors with "<flag>=<path>" as their source; "" for a file of whitespace.
absl::StatusOr<std::string> ReadBearerTokenFile(const std::string& path, absl::string_view flag);

// An HTTP Authorization header's value as gRPC metadata may carry it: for the
// Bearer scheme "Bearer <token>" with the token cleaned as above; any other
// value trimmed, and refused if it holds a byte that is not visible ASCII or a
// space. Messages name "the Authorization header", never its value.
absl::StatusOr<std::string> CleanAuthorization(absl::string_view header);

}  // namespace omnistage

#endif  // OMNISTAGE_COMMON_BEARER_TOKEN_H_
