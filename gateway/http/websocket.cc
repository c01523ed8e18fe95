#include "gateway/http/websocket.h"

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <wslay/wslay.h>

#include <utility>

namespace omnistage {

// wslay's I/O and message callbacks: the bytes go through the bufferevent's
// buffers, which libevent fills and empties on the loop.
struct WebSocketIo {
  static ssize_t Recv(wslay_event_context_ptr ctx, uint8_t* data, size_t length, int,
                      void* arg) {
    auto* self = static_cast<WebSocket*>(arg);
    struct bufferevent* bev = self->upgrade_->bufferevent();
    const int n = bev != nullptr ? evbuffer_remove(bufferevent_get_input(bev), data, length) : -1;
    if (n <= 0) {
      // Nothing more until the next read callback.
      wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
      return -1;
    }
    return n;
  }

  static ssize_t Send(wslay_event_context_ptr ctx, const uint8_t* data, size_t length, int,
                      void* arg) {
    auto* self = static_cast<WebSocket*>(arg);
    struct bufferevent* bev = self->upgrade_->bufferevent();
    if (bev == nullptr || evbuffer_add(bufferevent_get_output(bev), data, length) != 0) {
      wslay_event_set_error(ctx, WSLAY_ERR_CALLBACK_FAILURE);
      return -1;
    }
    return static_cast<ssize_t>(length);
  }

  static void Message(wslay_event_context_ptr, const wslay_event_on_msg_recv_arg* message,
                      void* arg) {
    auto* self = static_cast<WebSocket*>(arg);
    // Pings are answered by wslay, closes answered and noticed by CheckDone.
    if (message->opcode != WSLAY_TEXT_FRAME && message->opcode != WSLAY_BINARY_FRAME) return;
    if (self->finished_ || !self->on_message_) return;
    self->on_message_(std::string(reinterpret_cast<const char*>(message->msg),
                                  message->msg_length));
  }
};

std::unique_ptr<WebSocket> WebSocket::Start(std::unique_ptr<HttpUpgrade> upgrade,
                                            const WebSocketLimits& limits,
                                            MessageHandler on_message, ClosedHandler on_closed) {
  if (upgrade == nullptr || upgrade->bufferevent() == nullptr) return nullptr;
  std::unique_ptr<WebSocket> ws(
      new WebSocket(std::move(upgrade), limits, std::move(on_message), std::move(on_closed)));
  if (!ws->Init()) return nullptr;
  return ws;
}

WebSocket::WebSocket(std::unique_ptr<HttpUpgrade> upgrade, const WebSocketLimits& limits,
                     MessageHandler on_message, ClosedHandler on_closed)
    : upgrade_(std::move(upgrade)),
      limits_(limits),
      on_message_(std::move(on_message)),
      on_closed_(std::move(on_closed)) {}

bool WebSocket::Init() {
  static const wslay_event_callbacks kCallbacks = {
      &WebSocketIo::Recv, &WebSocketIo::Send, nullptr, nullptr, nullptr, nullptr,
      &WebSocketIo::Message};
  if (wslay_event_context_server_init(&ctx_, &kCallbacks, this) != 0) return false;
  wslay_event_config_set_max_recv_msg_length(ctx_, limits_.max_message_bytes);
  struct bufferevent* bev = upgrade_->bufferevent();
  event_base* base = bufferevent_get_base(bev);
  ping_ = event_new(base, -1, EV_PERSIST, &WebSocket::OnPing, this);
  finish_ = event_new(base, -1, 0, &WebSocket::OnFinish, this);
  const timeval ping = absl::ToTimeval(limits_.ping_interval);
  event_add(ping_, &ping);
  // The server stopping frees the connection under us, and its loop runs no
  // more: the end is told at once.
  upgrade_->OnServerClosed([this] {
    finished_ = true;
    Finish();
  });
  // A peer silent this long is gone (pings draw pongs from a live one).
  const timeval idle = absl::ToTimeval(limits_.idle_timeout);
  bufferevent_set_timeouts(bev, &idle, &idle);
  bufferevent_setcb(bev, &WebSocket::OnRead, &WebSocket::OnWrite, &WebSocket::OnEvent, this);
  // The 101 may still be on its way (OnWrite hears when it went); bytes the
  // client sent right behind its request are already in.
  if (evbuffer_get_length(bufferevent_get_input(bev)) > 0) {
    event_active(finish_, EV_READ, 0);
  }
  return true;
}

WebSocket::~WebSocket() {
  on_closed_ = nullptr;
  if (ping_ != nullptr) event_free(ping_);
  if (finish_ != nullptr) event_free(finish_);
  if (struct bufferevent* bev = upgrade_ != nullptr ? upgrade_->bufferevent() : nullptr) {
    bufferevent_setcb(bev, nullptr, nullptr, nullptr, nullptr);
  }
  upgrade_.reset();  // Closes the connection if it is open.
  if (ctx_ != nullptr) wslay_event_context_free(ctx_);
}

size_t WebSocket::buffered() const {
  struct bufferevent* bev = upgrade_->bufferevent();
  return bev != nullptr ? evbuffer_get_length(bufferevent_get_output(bev)) : 0;
}

void WebSocket::Send(const std::string& text) {
  if (finished_) return;
  wslay_event_msg message{WSLAY_TEXT_FRAME, reinterpret_cast<const uint8_t*>(text.data()),
                          text.size()};
  // wslay copies it; refused once a close was queued.
  if (wslay_event_queue_msg(ctx_, &message) != 0) return;
  if (!receiving_) Flush();
}

void WebSocket::Close(uint16_t code, const std::string& reason) {
  if (finished_) return;
  const size_t length = reason.size() < 123 ? reason.size() : 122;
  wslay_event_queue_close(ctx_, code, reinterpret_cast<const uint8_t*>(reason.data()), length);
  if (!receiving_) Flush();
}

void WebSocket::WhenDrained(std::function<void()> drained) {
  if (finished_) return;
  if (buffered() == 0) {
    drained();
    return;
  }
  drained_.push_back(std::move(drained));
}

void WebSocket::Flush() {
  if (finished_) return;
  if (wslay_event_want_write(ctx_) && wslay_event_send(ctx_) != 0) {
    FinishSoon();
    return;
  }
  struct bufferevent* bev = upgrade_->bufferevent();
  if (bev == nullptr) return;
  // A client that does not read: stop taking its messages until it does.
  if (!reading_paused_ && buffered() > limits_.max_buffered_bytes) {
    reading_paused_ = true;
    bufferevent_disable(bev, EV_READ);
  }
  CheckDone();
}

void WebSocket::CheckDone() {
  // Both closes went (or reading ended on an error and the close is out):
  // once the last bytes left, the connection is over.
  if (!wslay_event_want_read(ctx_) && !wslay_event_want_write(ctx_) && buffered() == 0) {
    FinishSoon();
  }
}

void WebSocket::FinishSoon() {
  if (finished_ || finish_ == nullptr) return;
  finished_ = true;
  event_active(finish_, EV_TIMEOUT, 0);
}

void WebSocket::Finish() {
  event_del(ping_);
  drained_.clear();
  if (struct bufferevent* bev = upgrade_->bufferevent()) {
    bufferevent_setcb(bev, nullptr, nullptr, nullptr, nullptr);
  }
  upgrade_->Close();
  ClosedHandler on_closed = std::move(on_closed_);
  on_closed_ = nullptr;
  if (on_closed) on_closed();  // Last: it may destroy this.
}

void WebSocket::RunDrained() {
  std::vector<std::function<void()>> drained;
  drained.swap(drained_);
  for (auto& run : drained) {
    if (finished_) return;
    run();
  }
}

void WebSocket::OnRead(struct bufferevent*, void* arg) {
  auto* self = static_cast<WebSocket*>(arg);
  if (self->finished_) return;
  self->receiving_ = true;
  const int failed = wslay_event_recv(self->ctx_);
  self->receiving_ = false;
  if (failed != 0) {
    self->FinishSoon();
    return;
  }
  self->Flush();
}

void WebSocket::OnWrite(struct bufferevent* bev, void* arg) {
  // The output drained (the write low watermark is 0).
  auto* self = static_cast<WebSocket*>(arg);
  if (self->finished_) return;
  if (self->idle_closing_) {
    self->FinishSoon();
    return;
  }
  if (self->reading_paused_) {
    self->reading_paused_ = false;
    bufferevent_enable(bev, EV_READ);
  }
  self->RunDrained();
  if (!self->finished_) self->CheckDone();
}

void WebSocket::OnEvent(struct bufferevent*, short what, void* arg) {
  auto* self = static_cast<WebSocket*>(arg);
  if ((what & BEV_EVENT_TIMEOUT) && (what & BEV_EVENT_READING) && !self->idle_closing_) {
    self->CloseIdle();
    return;
  }
  // EOF, an error, or the client not reading: it is gone.
  self->FinishSoon();
}

void WebSocket::CloseIdle() {
  if (finished_) return;
  // A client that still reads (one that merely answers no ping) learns why;
  // its answer is not awaited, and the write timeout bounds the wait for the
  // close to go out to one that does not read either.
  idle_closing_ = true;
  static constexpr char kReason[] = "idle timeout";
  wslay_event_queue_close(ctx_, 1001, reinterpret_cast<const uint8_t*>(kReason),
                          sizeof(kReason) - 1);
  if (wslay_event_want_write(ctx_)) wslay_event_send(ctx_);
  if (buffered() == 0) FinishSoon();
}

void WebSocket::OnPing(int, short, void* arg) {
  auto* self = static_cast<WebSocket*>(arg);
  if (self->finished_) return;
  wslay_event_msg ping{WSLAY_PING, nullptr, 0};
  wslay_event_queue_msg(self->ctx_, &ping);
  self->Flush();
}

void WebSocket::OnFinish(int, short what, void* arg) {
  auto* self = static_cast<WebSocket*>(arg);
  // EV_READ: the first read, of bytes already in at the start.
  if (what & EV_READ) {
    if (!self->finished_) OnRead(self->upgrade_->bufferevent(), self);
    return;
  }
  self->Finish();
}

}  // namespace omnistage
