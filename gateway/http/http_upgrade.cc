#include "gateway/http/http_upgrade.h"

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>

#include <utility>

#include "gateway/http/http_connections.h"
#include "gateway/http/http_server.h"

namespace omnistage {

std::unique_ptr<HttpUpgrade> HttpExchange::Upgrade(const std::string& head) {
  if (request_ == nullptr || streaming_) return nullptr;
  evhttp_connection* evcon = evhttp_request_get_connection(request_);
  bufferevent* bev = evcon != nullptr ? evhttp_connection_get_bufferevent(evcon) : nullptr;
  if (bev == nullptr) return nullptr;
  HttpConnection* connection = connection_;
  status_ = 101;
  EndSpan();
  // The exchange lets go without answering: the request stays queued on its
  // connection (evhttp keeps a request there until it is answered) and is
  // freed with it.
  Release();
  // evhttp's callbacks go; it reads and writes on a connection only from
  // them (having read a request, it stopped reading until the answer).
  bufferevent_setcb(bev, nullptr, nullptr, nullptr, nullptr);
  evbuffer_add(bufferevent_get_output(bev), head.data(), head.size());
  bufferevent_enable(bev, EV_READ | EV_WRITE);
  std::unique_ptr<HttpUpgrade> upgrade(new HttpUpgrade(evcon, connection));
  upgrade->SetHook(true);
  return upgrade;
}

HttpUpgrade::HttpUpgrade(evhttp_connection* evcon, HttpConnection* connection)
    : evcon_(evcon), connection_(connection) {}

HttpUpgrade::~HttpUpgrade() { Close(); }

bufferevent* HttpUpgrade::bufferevent() const {
  return evcon_ != nullptr ? evhttp_connection_get_bufferevent(evcon_) : nullptr;
}

void HttpUpgrade::SetHook(bool on) {
  if (connection_ != nullptr) {
    HttpConnections::SetCloseHook(connection_, on ? &HttpUpgrade::OnClosed : nullptr,
                                  on ? this : nullptr);
  } else {
    evhttp_connection_set_closecb(evcon_, on ? &HttpUpgrade::OnEvhttpClosed : nullptr,
                                  on ? this : nullptr);
  }
}

void HttpUpgrade::Close() {
  if (evcon_ == nullptr) return;
  SetHook(false);
  evhttp_connection* evcon = evcon_;
  evcon_ = nullptr;
  connection_ = nullptr;
  on_server_closed_ = nullptr;
  // Tells HttpConnections (the open count, the observer), frees the queued
  // request, the bufferevent and the socket.
  evhttp_connection_free(evcon);
}

void HttpUpgrade::OnEvhttpClosed(evhttp_connection*, void* self) { OnClosed(self); }

void HttpUpgrade::OnClosed(void* arg) {
  // evhttp is freeing the connection (the server stops): it is not ours to
  // free any more.
  auto* self = static_cast<HttpUpgrade*>(arg);
  self->evcon_ = nullptr;
  self->connection_ = nullptr;
  std::function<void()> hook = std::move(self->on_server_closed_);
  self->on_server_closed_ = nullptr;
  if (hook) hook();
}

}  // namespace omnistage
