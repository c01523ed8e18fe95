// HttpUpgrade: a connection HttpServer's HTTP handed over to another protocol
// (WebSocket: websocket.h) by HttpExchange::Upgrade.
//
// libevent 2.1's evhttp has no way to give a connection up (2.2 adds one for
// its own WebSockets), so the connection stays evhttp's in name: its request
// stays queued on it unanswered, while its bufferevent's callbacks become the
// new protocol's and evhttp's own never run again (evhttp neither reads nor
// writes on a connection but from those callbacks). It is still counted
// among the open connections (HttpLimits: max_connections and
// max_connections_per_address bound WebSockets too), its close is still told
// to HttpConnections' observer, and evhttp still frees it when the server
// stops (then OnServerClosed's hook runs). Closing it is evhttp's own
// evhttp_connection_free, which frees the request, the bufferevent (and TLS
// state) and the socket. Loop thread only.
#ifndef OMNISTAGE_GATEWAY_HTTP_HTTP_UPGRADE_H_
#define OMNISTAGE_GATEWAY_HTTP_HTTP_UPGRADE_H_

#include <functional>

struct bufferevent;
struct evhttp_connection;

namespace omnistage {

struct HttpConnection;
class HttpExchange;

class HttpUpgrade {
 public:
  // Closes the connection, unless it was closed already.
  ~HttpUpgrade();
  HttpUpgrade(const HttpUpgrade&) = delete;
  HttpUpgrade& operator=(const HttpUpgrade&) = delete;

  // The connection's bufferevent (TLS or not), whose callbacks are the new
  // protocol's to set; null once closed.
  struct bufferevent* bufferevent() const;
  // Runs once if the server closes the connection first (HttpServer::Stop);
  // bufferevent() is gone from then on.
  void OnServerClosed(std::function<void()> hook) { on_server_closed_ = std::move(hook); }
  // Closes the connection now. Allowed from within the bufferevent's own
  // callbacks (libevent holds a reference on it while they run).
  void Close();

 private:
  friend class HttpExchange;
  HttpUpgrade(evhttp_connection* evcon, HttpConnection* connection);
  static void OnClosed(void* self);
  static void OnEvhttpClosed(evhttp_connection*, void* self);
  void SetHook(bool on);

  evhttp_connection* evcon_;
  // What tells the connection's close (nullptr: evhttp's own close callback).
  HttpConnection* connection_;
  std::function<void()> on_server_closed_;
};

}  // namespace omnistage

#endif  // OMNISTAGE_GATEWAY_HTTP_HTTP_UPGRADE_H_
