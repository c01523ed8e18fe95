// WebSocket: the server's side of one WebSocket connection (RFC 6455) on a
// connection taken over from HttpServer (HttpUpgrade, whose 101 is written),
// framed by wslay and driven from the connection's bufferevent callbacks on
// the server's loop thread — over TLS as over plain TCP, the bufferevent
// hiding which.
//
// wslay answers pings, fails a protocol error with the close code it calls
// for, closes a message past `max_message_bytes` with 1009, and does the
// close handshake. The server pings every `ping_interval`; a connection that
// brings no byte for `idle_timeout` (a client that vanished without a FIN, or
// one that answers no ping) is sent a close, 1001 "idle timeout", that is not
// waited for: the connection ends once it went out. One that takes none of
// what is sent for `idle_timeout` is closed, and so is one whose client sent a
// close and got the answer. Whatever ends it, `on_closed` runs
// once, last: the owner may destroy the WebSocket from it.
//
//   auto ws = WebSocket::Start(std::move(upgrade), limits,
//                              [](std::string text) { ... }, [] { ... });
//   ws->Send(R"({"type": "session.created"})");
//
// Loop thread only. While the client does not read, what is queued for it
// grows only to `max_buffered_bytes`: past it the connection stops reading
// the client's messages until the queue drains.
#ifndef OMNISTAGE_GATEWAY_HTTP_WEBSOCKET_H_
#define OMNISTAGE_GATEWAY_HTTP_WEBSOCKET_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "gateway/http/http_upgrade.h"

struct bufferevent;
struct event;
struct wslay_event_context;

namespace omnistage {

struct WebSocketLimits {
  // A message from the client (its frames together); larger: closed, 1009.
  size_t max_message_bytes = 16 << 20;
  // What may wait in the gateway for a slow client before it stops reading
  // the client's messages.
  size_t max_buffered_bytes = 16 << 20;
  absl::Duration ping_interval = absl::Seconds(30);
  absl::Duration idle_timeout = absl::Seconds(90);
};

class WebSocket {
 public:
  using MessageHandler = std::function<void(std::string message)>;
  using ClosedHandler = std::function<void()>;
  // Starts speaking WebSocket on `upgrade`. `on_message` gets each whole text
  // or binary message; `on_closed` runs once when the connection ended.
  static std::unique_ptr<WebSocket> Start(std::unique_ptr<HttpUpgrade> upgrade,
                                          const WebSocketLimits& limits,
                                          MessageHandler on_message, ClosedHandler on_closed);
  // Closes the connection at once if it is still open (on_closed does not run).
  ~WebSocket();
  WebSocket(const WebSocket&) = delete;
  WebSocket& operator=(const WebSocket&) = delete;

  // Sends a text message (dropped once closing).
  void Send(const std::string& text);
  // Starts the close handshake with `code` (1000: normal, 1001: going away,
  // 1008: policy) and a short reason.
  void Close(uint16_t code, const std::string& reason);
  // Bytes handed to the connection and not yet to the socket.
  size_t buffered() const;
  // Runs `drained` once everything sent so far has gone to the socket (at
  // once if it has); dropped if the connection ends first.
  void WhenDrained(std::function<void()> drained);
  bool open() const { return !finished_; }

 private:
  WebSocket(std::unique_ptr<HttpUpgrade> upgrade, const WebSocketLimits& limits,
            MessageHandler on_message, ClosedHandler on_closed);
  bool Init();
  // Moves what wslay queued to the bufferevent; notices the end.
  void Flush();
  // After a read or a write: ends the connection when both sides closed.
  void CheckDone();
  // Frees the connection and tells the owner (last).
  void Finish();
  // Schedules Finish() on the loop (from where `this` must live on).
  void FinishSoon();
  void RunDrained();
  // The client sent nothing for the idle timeout: 1001, then the end.
  void CloseIdle();

  static void OnRead(struct bufferevent*, void* self);
  static void OnWrite(struct bufferevent*, void* self);
  static void OnEvent(struct bufferevent*, short what, void* self);
  static void OnPing(int, short, void* self);
  static void OnFinish(int, short, void* self);

  std::unique_ptr<HttpUpgrade> upgrade_;
  const WebSocketLimits limits_;
  MessageHandler on_message_;
  ClosedHandler on_closed_;
  wslay_event_context* ctx_ = nullptr;
  event* ping_ = nullptr;
  event* finish_ = nullptr;
  // Within wslay_event_recv: sends wait until it returns.
  bool receiving_ = false;
  bool reading_paused_ = false;
  // The idle close went to wslay: the connection ends once it is written.
  bool idle_closing_ = false;
  bool finished_ = false;
  std::vector<std::function<void()>> drained_;

  friend struct WebSocketIo;
};

}  // namespace omnistage

#endif  // OMNISTAGE_GATEWAY_HTTP_WEBSOCKET_H_
