#include "common/bearer_token.h"

#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace omnistage {
namespace {

// What a byte that may not be in a token is, in words (never the byte itself).
const char* Kind(unsigned char c) {
  if (c == ' ') return "a space";
  if (c < 0x20 || c == 0x7f) return "a control character";
  return "a byte beyond ASCII";
}

// The first byte of `text` outside '!'..'~' (or, with `spaces`, ' '..'~'),
// or npos.
size_t FirstBadByte(absl::string_view text, bool spaces) {
  for (size_t i = 0; i < text.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c > 0x7e || c < (spaces ? 0x20 : 0x21)) return i;
  }
  return absl::string_view::npos;
}

}  // namespace

absl::StatusOr<std::string> CleanBearerToken(absl::string_view raw, absl::string_view source) {
  const absl::string_view token = absl::StripAsciiWhitespace(raw);
  const size_t bad = FirstBadByte(token, /*spaces=*/false);
  if (bad != absl::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat(
        source, ": the bearer token holds ", Kind(static_cast<unsigned char>(token[bad])),
        " (character ", bad + 1,
        "); a token is one word of visible ASCII: check what wrote it there"));
  }
  return std::string(token);
}

absl::StatusOr<std::string> ReadBearerTokenFile(const std::string& path, absl::string_view flag) {
  std::ifstream in(path);
  std::stringstream content;
  if (!in || !(content << in.rdbuf())) {
    return absl::InvalidArgumentError(absl::StrCat(flag, ": cannot read ", path));
  }
  return CleanBearerToken(content.str(), absl::StrCat(flag, "=", path));
}

absl::StatusOr<std::string> CleanAuthorization(absl::string_view header) {
  const absl::string_view value = absl::StripAsciiWhitespace(header);
  constexpr absl::string_view kBearer = "Bearer ";
  if (value.size() > kBearer.size() && absl::StartsWithIgnoreCase(value, kBearer)) {
    absl::StatusOr<std::string> token =
        CleanBearerToken(value.substr(kBearer.size()), "the Authorization header");
    if (!token.ok()) return token.status();
    return absl::StrCat("Bearer ", *token);
  }
  const size_t bad = FirstBadByte(value, /*spaces=*/true);
  if (bad != absl::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("the Authorization header holds ", Kind(static_cast<unsigned char>(value[bad])),
                     " (character ", bad + 1, "); send 'Bearer <token>' in visible ASCII"));
  }
  return std::string(value);
}

}  // namespace omnistage
