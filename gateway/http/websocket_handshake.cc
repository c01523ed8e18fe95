#include "gateway/http/websocket_handshake.h"

#include <openssl/sha.h>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace omnistage {
namespace {

// RFC 6455, 1.3.
constexpr char kGuid[] = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

// Whether a comma-separated header holds `token` (case-insensitively):
// browsers send "Connection: keep-alive, Upgrade".
bool HasToken(const std::string& header, const char* token) {
  for (absl::string_view part : absl::StrSplit(header, ',')) {
    if (absl::EqualsIgnoreCase(absl::StripAsciiWhitespace(part), token)) return true;
  }
  return false;
}

ApiError BadUpgrade(const std::string& message) {
  return ApiError{400, "invalid_request_error", message, "", "invalid_websocket_upgrade",
                  std::nullopt};
}

}  // namespace

bool WantsWebSocket(const WebSocketRequest& request) {
  return HasToken(request.upgrade, "websocket");
}

std::string WebSocketAccept(const std::string& key) {
  const std::string text = absl::StrCat(key, kGuid);
  unsigned char digest[SHA_DIGEST_LENGTH];
  SHA1(reinterpret_cast<const unsigned char*>(text.data()), text.size(), digest);
  return absl::Base64Escape(
      absl::string_view(reinterpret_cast<const char*>(digest), sizeof(digest)));
}

std::variant<std::string, ApiError> AcceptWebSocket(const WebSocketRequest& request) {
  if (request.method != "GET") {
    return BadUpgrade(absl::StrCat("a WebSocket upgrade is a GET, not a ", request.method));
  }
  if (!WantsWebSocket(request)) return BadUpgrade("the request has no 'Upgrade: websocket' header");
  if (!HasToken(request.connection, "upgrade")) {
    return BadUpgrade("the request's Connection header does not say 'Upgrade'");
  }
  if (absl::StripAsciiWhitespace(request.version) != "13") {
    return ApiError{426, "invalid_request_error",
                    absl::StrCat("WebSocket version '", request.version,
                                 "' is not served; only 13 (RFC 6455) is"),
                    "", "unsupported_websocket_version", std::nullopt};
  }
  const std::string key(absl::StripAsciiWhitespace(request.key));
  std::string decoded;
  if (!absl::Base64Unescape(key, &decoded) || decoded.size() != 16) {
    return BadUpgrade("Sec-WebSocket-Key must be 16 bytes in base64");
  }
  return absl::StrCat("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n",
                      "Connection: Upgrade\r\nSec-WebSocket-Accept: ", WebSocketAccept(key),
                      "\r\n\r\n");
}

}  // namespace omnistage
