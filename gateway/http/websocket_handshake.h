// The server's side of the WebSocket opening handshake (RFC 6455, 4.2): is an
// HTTP request a well-formed upgrade, and the 101 answer that accepts it.
// Pure: no I/O (websocket.h moves the frames once the answer is written).
//
//   std::variant<std::string, ApiError> head = AcceptWebSocket(request);
//   // a string: the "HTTP/1.1 101 Switching Protocols" head to write;
//   // an ApiError: the 400 (or 426) to answer instead.
#ifndef OMNISTAGE_GATEWAY_HTTP_WEBSOCKET_HANDSHAKE_H_
#define OMNISTAGE_GATEWAY_HTTP_WEBSOCKET_HANDSHAKE_H_

#include <string>
#include <variant>

#include "gateway/http/api_error.h"

namespace omnistage {

// The request's parts the handshake reads ("" for a header that is absent).
struct WebSocketRequest {
  std::string method;
  std::string upgrade;     // Upgrade
  std::string connection;  // Connection
  std::string version;     // Sec-WebSocket-Version
  std::string key;         // Sec-WebSocket-Key
};

// Whether the request asks to switch to WebSocket at all (Upgrade: websocket).
bool WantsWebSocket(const WebSocketRequest& request);

// Sec-WebSocket-Accept for a Sec-WebSocket-Key: base64(SHA-1(key + the RFC's
// GUID)).
std::string WebSocketAccept(const std::string& key);

// The 101 head (status line and headers, ending with an empty line) that
// accepts `request`, or why it is refused: 400 for a malformed upgrade (not a
// GET, no "Upgrade" in Connection, a key that is not 16 bytes in base64), 426
// for a version other than 13 (with Sec-WebSocket-Version: 13 in
// ApiError::Headers terms: the caller adds it).
std::variant<std::string, ApiError> AcceptWebSocket(const WebSocketRequest& request);

}  // namespace omnistage

#endif  // OMNISTAGE_GATEWAY_HTTP_WEBSOCKET_HANDSHAKE_H_
